"""One way to open a .rec's sidecars (``recpipe.io.sidecars.opening.open_sidecars``): the index
(parsed by the one .idx parser, which owns its text fallback), the checksums and the quarantine
view, each module called once and only downward."""

import ast
import os
import pathlib

import pytest

import recpipe
from recpipe.errors import RecordFormatError
from recpipe.io.sidecars.opening import load_index_table, open_sidecars
from recpipe.io.sources import open_source

SIDECARS = pathlib.Path(recpipe.__file__).parent / "io" / "sidecars"


def _pack(path, keys=None, sums=True):
    with recpipe.RecordWriter(str(path), sums=sums) as writer:
        for i in range(6):
            writer.write(b"x" * (i + 1), key=i if keys is None else keys[i])
    return str(path)


def test_the_sidecars_open_together(tmp_path):
    rec = _pack(tmp_path / "a.rec", keys=[7, 3, 5, 1, 0, 2])
    with open_source(rec) as source:
        found = open_sidecars(rec, source, quarantine=True)
    assert found.index_url == str(tmp_path / "a.idx")
    assert list(found.table.keys) == [7, 3, 5, 1, 0, 2] and len(found.sums) == 6
    assert not found.quarantine.mask(list(range(6))).any()
    with open_source(rec) as source:
        bare = open_sidecars(rec, source, index_url=False, integrity="off")
    assert bare.index_url is None and bare.sums is None and bare.quarantine is None
    assert bare.table.identity and list(bare.table.offsets) == list(found.table.offsets)


def test_a_missing_index_named_is_an_error_and_a_bad_offset_names_its_line(tmp_path):
    rec = _pack(tmp_path / "b.rec")
    with open_source(rec) as source:
        with pytest.raises(FileNotFoundError, match="other.idx"):
            open_sidecars(rec, source, index_url=str(tmp_path / "other.idx"))
    with open(tmp_path / "b.idx", "a") as f:
        f.write("6\t999999\n")
    with open_source(rec) as source, pytest.raises(RecordFormatError, match="line 7: offset "
                                                   "999999 is past the end of the file"):
        open_sidecars(rec, source, integrity="off")


def test_the_text_fallback_keeps_its_precise_errors(tmp_path):
    _pack(tmp_path / "c.rec")
    text = open(tmp_path / "c.idx").read().splitlines()
    text[3] = "3\tfour"
    open(tmp_path / "c.idx", "w").write("\n".join(text) + "\n")
    with pytest.raises(RecordFormatError, match="index line 4: offset 'four' is not an integer"):
        load_index_table(str(tmp_path / "c.idx"))


def _imports(name):
    tree = ast.parse((SIDECARS / f"{name}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found |= {f"{node.module}.{alias.name}" if node.module else alias.name
                      for alias in node.names}
            found.add(node.module or "")
    return found


def test_each_sidecar_module_knows_only_what_is_below_it():
    cache = _imports("index_cache")
    assert not any(name.startswith(("index.", "sources")) or name == "index" for name in cache), \
        "the index cache takes a build function: it knows no .idx text and opens no source"
    assert not any(name.startswith("index") for name in _imports("sums")), \
        "the sums read their own sidecar"
    parsers = [path.name for path in sorted(SIDECARS.parent.parent.rglob("*.py"))
               if path != SIDECARS / "index.py" and _calls(path, {"parse_index",
                                                                  "parse_index_chunks"})]
    assert parsers == [], f"the .idx is parsed in sidecars/index.py only, not in {parsers}"


def _calls(path, names):
    return any(isinstance(node, ast.Call) and getattr(node.func, "id", None) in names
               for node in ast.walk(ast.parse(path.read_text())))


def test_a_reader_and_a_loader_open_through_it(tmp_path, monkeypatch):
    from recpipe.io.sidecars import opening

    rec = _pack(tmp_path / "d.rec")
    calls = []
    real = opening.open_sidecars
    monkeypatch.setattr("recpipe.io.reader.open_sidecars",
                        lambda *a, **k: calls.append(k.get("quarantine")) or real(*a, **k))
    with recpipe.RecordReader(rec) as reader:
        assert reader.quarantine is None and reader.sums is not None
    assert calls == [False]
    assert os.path.exists(tmp_path / "d.sums")
