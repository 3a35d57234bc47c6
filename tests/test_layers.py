"""The package's layers, read from its imports (lazy ones inside functions too): every import
between rooms points to a lower floor, so the layers have no cycle and no upward arrow. A new
room (a top-level module or package of recpipe) must be given its floor here."""

import ast
import collections
import functools
import pathlib

import recpipe

ROOT = pathlib.Path(recpipe.__file__).parent

# room -> floor; a room imports only rooms of lower floors. A room is a top-level module or
# package of recpipe, or a wing of one (a dotted name such as "mx.images"): a module belongs to the
# longest room its name starts with. A package named in FACES has its __init__ as a room of its
# own ("image/"), apart from its modules.
FLOORS = {
    "errors": 10, "spelling": 10, "_optional": 10, "system": 10,  # what everything may use
    "mx.coverage": 15,  # what recpipe.mx serves of MXNet, and the error for the rest
    "image": 20,  # image bytes and pixels: JPEG markers, header facts, OpenCV
    "mx.images": 25,  # mx.image's imdecode/imread/ImageArray, on those pixels
    "image/": 27,  # recpipe.image's face, which is also mx.image for `import recpipe as mx`
    "io": 30,  # RecordIO files, indexes, sources, integrity
    "decode.tune": 35,  # the decode-thread autotuner: its controller and the loader's side
    "decode": 40, "mx.recordio": 40,  # decoding and augmenting into batches; mx.recordio
    "adapters": 45,  # what the framework adapters share (gluon's transforms, the loader facade)
    "mx.keywords": 50, "capacity": 50, "torch": 50, "__init__": 50,
    "mx.record_iter": 60, "packing": 60, "report": 60, "view": 60,
    "mx": 70,  # the rest of MXNet's namespace: mx.io, mx.gluon, mx.nd, contexts, ...
    "cli": 80,
    "__main__": 90,
}
FACES = {"image"}
# old import paths kept for users (``recpipe.host`` ...), each bound to the module it names here:
# recpipe itself never imports them
ALIASES = {"host": "system.host", "env": "system.env", "distributed": "system.distributed",
           "mxnet": "mx.record_iter", "mxnet_keywords": "mx.keywords", "recordio": "mx.recordio",
           "image.mximage": "mx.images", "plan": "capacity",
           "decode.autotune": "decode.tune.controller", "decode.tuning_window": "decode.tune.tuner",
           "packing.im2rec": "mx.im2rec"}


def _module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.lru_cache(maxsize=None)
def _modules():
    return frozenset(_module_name(path) for path in ROOT.rglob("*.py"))


def _from(module, names):
    """What ``from module import names`` imports: the submodules among ``names`` (``from .mx
    import recordio`` is ``recpipe.mx.recordio``), and ``module`` for the other names."""
    modules = _modules()
    for name in names:
        yield f"{module}.{name}" if f"{module}.{name}" in modules else module


def _imported(path):
    """The recpipe modules ``path`` imports, anywhere in it."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        names = [alias.name for alias in node.names]
        if isinstance(node, ast.Import):
            yield from names
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield from _from(node.module, names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
            yield from _from(f"{base}.{node.module}" if node.module else base, names)


def _room(module):
    parts = module.split(".")[1:]
    if not parts or parts[0] == "__version__":
        return "__init__"
    if ".".join(parts) in FACES:
        return ".".join(parts) + "/"
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in FLOORS or ".".join(parts[:end]) in ALIASES:
            return ".".join(parts[:end])
    return parts[0]


def arrows():
    """``{(from_room, to_room): [module importing, ...]}`` between different rooms."""
    found = collections.defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        source = _module_name(path)
        for target in _imported(path):
            if target and (target == "recpipe" or target.startswith("recpipe.")):
                pair = (_room(source), _room(target))
                if pair[0] != pair[1]:
                    found[pair].append(source)
    return found


def _rooms():
    return {_room(_module_name(path)) for path in ROOT.rglob("*.py")}


def test_every_room_has_a_floor():
    rooms = _rooms()
    assert rooms <= set(FLOORS) | set(ALIASES), \
        f"give these a floor: {rooms - set(FLOORS) - set(ALIASES)}"
    assert set(FLOORS) | set(ALIASES) <= rooms, \
        f"floors given to rooms that are not there: {set(FLOORS) | set(ALIASES) - rooms}"


def test_every_arrow_points_down():
    upward = {pair: modules for pair, modules in arrows().items()
              if pair[0] not in ALIASES and pair[1] not in ALIASES
              and FLOORS[pair[0]] <= FLOORS[pair[1]]}
    assert not upward, f"imports that do not point to a lower floor: {upward}"


def test_the_old_paths_are_for_users_only():
    inside = {pair: modules for pair, modules in arrows().items()
              if pair[1] in ALIASES and pair[0] not in ALIASES}
    assert not inside, f"recpipe imports its own alias modules: {inside}"
    assert {pair for pair in arrows() if pair[0] in ALIASES} == \
        {(alias, _room(f"recpipe.{target}")) for alias, target in ALIASES.items()}


def test_the_old_paths_are_the_modules_they_name():
    """Each old path is the very module it names (one module object: names and patches
    shared), as the module ``sys.modules`` holds under both names."""
    import importlib

    for alias, target in ALIASES.items():
        assert importlib.import_module(f"recpipe.{alias}") is \
            importlib.import_module(f"recpipe.{target}"), alias
