"""The package's layers, read from its imports (lazy ones inside functions too): every import
between rooms points to a lower floor, so the layers have no cycle and no upward arrow. A new
room (a top-level module or package of recpipe, or a wing of one) must be given its floor here.
Old import paths of moved modules (``recpipe.moved``) are for users: recpipe never imports one."""

import ast
import collections
import functools
import pathlib

import recpipe
from recpipe.moved import MOVED, PACKAGES_MOVED, new_name

ROOT = pathlib.Path(recpipe.__file__).parent

# room -> floor; a room imports only rooms of lower floors. A room is a top-level module or
# package of recpipe, or a wing of one (a dotted name such as "mx.images"): a module belongs to the
# longest room its name starts with. A package named in FACES has its __init__ as a room of its
# own ("image/"), apart from its modules.
FLOORS = {
    "errors": 10, "spelling": 10, "_optional": 10, "system": 10,  # what everything may use
    "moved": 10,  # the old import paths of moved modules
    "mx.coverage": 15,  # what recpipe.mx serves of MXNet, and the error for the rest
    "image": 20,  # image bytes and pixels: JPEG markers, header facts, OpenCV
    "mx.images": 25,  # mx.image's imdecode/imread/ImageArray, on those pixels
    "image/": 27,  # recpipe.image's face, which is also mx.image for `import recpipe as mx`
    # RecordIO files: each wing imports only the wings and modules listed before it
    "io.source": 30,  # the byte source every reader reads through
    "io.format": 31,  # the format as bytes: framing, header, scan, sniff, face layout
    "io.remote": 32,  # reading over the network: range readers, retries, prefetch, cache
    "io.sources": 33,  # opening a source at any URL; whole small files
    "io.atomic": 34,  # outputs published whole or not at all
    "io.sidecars": 35,  # what describes a .rec: index, checksums, quarantine, sources, labels
    "io.reader": 36, "io.writer": 36,  # reading and writing a .rec with its sidecars
    "io.health": 37,  # checking a whole file: verify, integrity, contents, protection
    "io": 38,  # recpipe.io's face
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
# old import paths kept for users (``recpipe.host`` ...), each the module it names now
ALIASES = dict(MOVED)


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
        if ".".join(parts[:end]) in FLOORS:
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


def _all_imports():
    return {_module_name(path): list(_imported(path)) for path in sorted(ROOT.rglob("*.py"))}


def _rooms():
    return {_room(_module_name(path)) for path in ROOT.rglob("*.py")}


def test_every_room_has_a_floor():
    rooms = _rooms()
    assert rooms <= set(FLOORS), f"give these a floor: {rooms - set(FLOORS)}"
    assert set(FLOORS) <= rooms, f"floors given to rooms that are not there: {set(FLOORS) - rooms}"


def test_every_arrow_points_down():
    upward = {pair: modules for pair, modules in arrows().items()
              if FLOORS[pair[0]] <= FLOORS[pair[1]]}
    assert not upward, f"imports that do not point to a lower floor: {upward}"


def test_the_old_paths_are_for_users_only():
    inside = {module: source for source, modules in _all_imports().items()
              for module in modules if new_name(module) is not None}
    assert not inside, f"recpipe imports old paths of moved modules: {inside}"
    assert not [old for old in MOVED if (ROOT.parent / old.replace(".", "/")).exists()
                or (ROOT.parent / (old.replace(".", "/") + ".py")).exists()], \
        "an old path is a file again: give it back its place in recpipe.moved"


def test_the_old_paths_are_the_modules_they_name():
    """Each old path is the very module it names (one module object: names and patches
    shared), as the module ``sys.modules`` holds under both names."""
    import importlib

    for old, new in list(MOVED.items()) + list(PACKAGES_MOVED.items()):
        assert importlib.import_module(old) is importlib.import_module(new), old
        assert importlib.import_module(new).__spec__.name == new
    assert importlib.import_module("recpipe.io.ranges.s3") is \
        importlib.import_module("recpipe.io.remote.ranges.s3")
