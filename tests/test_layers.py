"""The package's layers, read from its imports (lazy ones inside functions too): every import
between rooms points to a lower floor, so the layers have no cycle and no upward arrow. A new
room (a top-level module or package of recpipe) must be given its floor here."""

import ast
import collections
import pathlib

import recpipe

ROOT = pathlib.Path(recpipe.__file__).parent

# room -> floor; a room imports only rooms of lower floors
FLOORS = {
    "errors": 1, "spelling": 1, "_optional": 1, "system": 1,  # what everything may use
    "image": 2,  # image bytes and pixels: JPEG markers, header facts, OpenCV, mx.image
    "io": 3,  # RecordIO files, indexes, sources, integrity
    "recordio": 4, "decode": 4,  # mx.recordio; decoding and augmenting into batches
    "mxnet_keywords": 5, "plan": 5, "torch": 5, "__init__": 5,
    "mxnet": 6, "packing": 6, "report": 6, "view": 6,
    "mx": 7, "cli": 7,
    "__main__": 8,
}
# old import paths kept for users (``recpipe.host`` ...): recpipe itself never imports them
ALIASES = {"host": "system", "env": "system", "distributed": "system"}


def _module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path):
    """The recpipe modules ``path`` imports, anywhere in it."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.module
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
            if node.module:
                yield f"{base}.{node.module}"
            else:
                yield from (f"{base}.{alias.name}" for alias in node.names)


def _room(module):
    parts = module.split(".")
    return "__init__" if len(parts) == 1 or parts[1] == "__version__" else parts[1]


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


def test_every_room_has_a_floor():
    rooms = {_room(_module_name(path)) for path in ROOT.rglob("*.py")}
    assert rooms - set(ALIASES) <= set(FLOORS), f"give these a floor: {rooms - set(FLOORS)}"


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
        {(alias, room) for alias, room in ALIASES.items()}
