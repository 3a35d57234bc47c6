import json
import os
import signal
import subprocess
import sys
import textwrap

import cv2
import fsspec
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.errors import DecodeError
from recpipe.io.sidecars.index import format_list_line
from recpipe.packing.inputs import InputLimits
from recpipe.packing.packer import pack_dataset, parse_size
from recpipe.packing.partition import cut_by_count
from recpipe.packing.transform import target_size

CLASSES = ("cat", "dog", "eel")
PER_CLASS = 4


def _jpeg(h, w, seed, noise=True, **params):
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:h, 0:w]
    third = rng.integers(0, 256, (h, w)) if noise else (xs + ys) * 255 // (h + w)
    img = np.stack([(xs * 255 // max(w - 1, 1)), (ys * 255 // max(h - 1, 1)), third],
                   axis=-1).astype(np.uint8)
    flags = []
    for key, value in params.items():
        flags += [getattr(cv2, key), value]
    ok, buf = cv2.imencode(".jpg", img, flags)
    assert ok
    return buf.tobytes()


@pytest.fixture
def photos(tmp_path):
    """SRC/<class>/<image>.jpg with sizes varying per image; returns the folder."""
    src = tmp_path / "src"
    seed = 0
    for name in CLASSES:
        (src / name).mkdir(parents=True)
        for i in range(PER_CLASS):
            seed += 1
            (src / name / f"img{i:02d}.jpg").write_bytes(_jpeg(20 + 3 * seed, 30 + 2 * i, seed))
    return src


def _walk_order(src):
    """(relative path, label) in sorted class/file order -- the items' indexes."""
    return [(f"{c}/{f}", float(label)) for label, c in enumerate(sorted(os.listdir(src)))
            for f in sorted(os.listdir(src / c))]


def _records(rec_url):
    with recpipe.RecordReader(rec_url) as reader:
        return [(key, reader[i]) for i, key in enumerate(reader.keys)]


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


def test_folder_labels_and_label_map(photos, tmp_path):
    summary = pack_dataset(photos, tmp_path / "out" / "train", resize=16, workers=0)
    assert summary.ok and summary.written == len(CLASSES) * PER_CLASS
    order = _walk_order(photos)
    records = _records(str(tmp_path / "out" / "train.rec"))
    assert sorted(key for key, _ in records) == list(range(len(order)))
    for key, payload in records:
        header, img = recpipe.unpack_img(payload)
        assert header.id == key
        assert header.label == order[key][1]
        assert min(img.shape[:2]) == 16
    labels = json.loads((tmp_path / "out" / "train.labels.json").read_text())
    assert labels["classes"] == {name: i for i, name in enumerate(CLASSES)}
    assert labels["splits"]["all"]["records"] == len(order)
    assert labels["splits"]["all"]["bytes"] == (tmp_path / "out" / "train.rec").stat().st_size
    assert _files(tmp_path / "out") == ["train.idx", "train.labels.json", "train.rec",
                                        "train.sources.jsonl", "train.sums"]


def test_list_input_keeps_order_and_labels(photos, tmp_path):
    order = _walk_order(photos)
    entries = [(100 + i, [label, 7.5], path) for i, (path, label) in enumerate(order)][::-1]
    lst = tmp_path / "my.lst"
    lst.write_text("".join(format_list_line(*entry) for entry in entries))
    summary = pack_dataset(lst, tmp_path / "o", root=photos, pass_through=True, pack_label=True)
    assert summary.ok and summary.classes is None
    records = _records(str(tmp_path / "o.rec"))
    assert [key for key, _ in records] == [entry[0] for entry in entries]
    for (_, payload), (_, labels, path) in zip(records, entries):
        header, image = recpipe.unpack(payload)
        assert list(header.label) == labels
        assert image == (photos / path).read_bytes()


def test_list_root_defaults_to_its_folder(photos, tmp_path):
    lst = photos / "all.lst"
    lst.write_text("".join(format_list_line(i, [lab], p)
                           for i, (p, lab) in enumerate(_walk_order(photos))))
    summary = pack_dataset(lst, tmp_path / "o", pass_through=True)
    assert summary.written == len(CLASSES) * PER_CLASS


def test_list_with_absolute_paths(photos, tmp_path):
    lst = tmp_path / "abs.lst"
    lst.write_text("".join(format_list_line(i, [lab], str(photos / p))
                           for i, (p, lab) in enumerate(_walk_order(photos))))
    # absolute paths leave the image root: refused unless allowed (tests/packing/test_untrusted.py)
    summary = pack_dataset(lst, tmp_path / "o", pass_through=True, root=tmp_path / "elsewhere",
                           limits=InputLimits(allow_outside_root=True))
    assert summary.ok and summary.written == len(CLASSES) * PER_CLASS


def test_images_directly_in_src_are_rejected(photos, tmp_path):
    (photos / "stray.jpg").write_bytes(_jpeg(10, 10, 0))
    with pytest.raises(ValueError, match="stray.jpg"):
        pack_dataset(photos, tmp_path / "o")
    assert not (tmp_path / "o.rec").exists()


def test_shards_by_count(photos, tmp_path):
    summary = pack_dataset(photos, tmp_path / "o", shards=5, pass_through=True, seed=3)
    names = [f"o-{i:05d}-of-00005" for i in range(5)]
    endings = ("idx", "rec", "sources.jsonl", "sums")
    assert _files(tmp_path) == sorted([f"{n}.{ext}" for n in names for ext in endings]
                                      + ["o.labels.json", "src"])
    counts = [len(_records(str(tmp_path / f"{n}.rec"))) for n in names]
    assert sum(counts) == summary.written and max(counts) - min(counts) <= 1
    keys = [k for n in names for k, _ in _records(str(tmp_path / f"{n}.rec"))]
    assert sorted(keys) == list(range(len(CLASSES) * PER_CLASS))


def test_cut_by_count_balanced():
    assert cut_by_count(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert cut_by_count(2, 3) == [(0, 1), (1, 2), (2, 2)]


def test_shards_by_size(photos, tmp_path):
    sizes = sorted(p.stat().st_size for p in photos.rglob("*.jpg"))
    limit = sizes[-1] * 3
    summary = pack_dataset(photos, tmp_path / "o", shard_size=limit, pass_through=True)
    shards = summary.splits["all"]
    assert len(shards) > 1
    for shard in shards:
        size = os.path.getsize(shard.rec)
        assert size == shard.bytes and (size <= limit or shard.records == 1)
    assert sum(s.records for s in shards) == len(sizes)


def test_parse_size():
    assert parse_size("256MB") == 256 << 20
    assert parse_size("1.5k") == 1536
    assert parse_size("100") == 100
    with pytest.raises(ValueError):
        parse_size("lots")


def _keys(rec):
    return [key for key, _ in _records(str(rec))]


def test_shuffle_seeded_and_reproducible(photos, tmp_path):
    runs = {}
    for name, kwargs in {"a": {"seed": 1}, "b": {"seed": 1}, "c": {"seed": 2},
                         "d": {"shuffle": False}}.items():
        pack_dataset(photos, tmp_path / name, pass_through=True, **kwargs)
        runs[name] = _keys(tmp_path / f"{name}.rec")
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]
    assert sorted(runs["a"]) == runs["d"] == list(range(len(CLASSES) * PER_CLASS))
    assert (tmp_path / "a.rec").read_bytes() == (tmp_path / "b.rec").read_bytes()


def test_val_split_disjoint_and_complete(photos, tmp_path):
    summary = pack_dataset(photos, tmp_path / "o", val_ratio=0.25, pass_through=True)
    train, val = _keys(tmp_path / "o_train.rec"), _keys(tmp_path / "o_val.rec")
    assert len(val) == round(len(CLASSES) * PER_CLASS * 0.25)
    assert not set(train) & set(val)
    assert sorted(train + val) == list(range(len(CLASSES) * PER_CLASS))
    assert set(summary.splits) == {"train", "val"}
    labels = json.loads((tmp_path / "o.labels.json").read_text())
    assert labels["splits"]["val"]["records"] == len(val)


def test_pass_through_bytes_equal_files(photos, tmp_path):
    pack_dataset(photos, tmp_path / "o", pass_through=True)
    order = _walk_order(photos)
    for key, payload in _records(str(tmp_path / "o.rec")):
        header, image = recpipe.unpack(payload)
        assert image == (photos / order[key][0]).read_bytes()
        assert header.label == order[key][1]


def test_pass_through_does_not_import_cv2(photos, tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from recpipe.packing.packer import pack_dataset
        pack_dataset({str(photos)!r}, {str(tmp_path / 'o')!r}, pass_through=True)
        print('cv2' in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("center_crop", [False, True])
def test_reencode_dims(photos, tmp_path, center_crop):
    pack_dataset(photos, tmp_path / "o", resize=12, center_crop=center_crop, quality=80)
    order = _walk_order(photos)
    for key, payload in _records(str(tmp_path / "o.rec")):
        _, img = recpipe.unpack_img(payload)
        h, w = cv2.imread(str(photos / order[key][0])).shape[:2]
        if center_crop:
            h = w = min(h, w)
        expected = (12, h * 12 // w) if h > w else (w * 12 // h, 12)
        assert img.shape[:2] == (expected[1], expected[0])


def test_png_encoding(photos, tmp_path):
    pack_dataset(photos, tmp_path / "o", encoding=".png", quality=3)
    for _, payload in _records(str(tmp_path / "o.rec")):
        _, image = recpipe.unpack(payload)
        assert image[:8] == b"\x89PNG\r\n\x1a\n"


def test_reduced_scale_decode_matches_full_decode(tmp_path):
    src = tmp_path / "src" / "a"
    src.mkdir(parents=True)
    (src / "big.jpg").write_bytes(_jpeg(160, 240, 5, noise=False))
    for exact in (False, True):
        pack_dataset(tmp_path / "src", tmp_path / f"o{exact}", resize=32, exact=exact)
    (_, fast), = _records(str(tmp_path / "oFalse.rec"))
    (_, full), = _records(str(tmp_path / "oTrue.rec"))
    fast_img, full_img = recpipe.unpack_img(fast)[1], recpipe.unpack_img(full)[1]
    assert fast_img.shape == full_img.shape == (32, 48, 3)
    assert target_size(160, 240, 32, False) == (48, 32)
    diff = np.abs(fast_img.astype(int) - full_img.astype(int)).mean()
    assert diff < 4  # same smooth picture, slightly different filtering


def _add_bad_image(photos):
    bad = photos / "dog" / "zz_bad.jpg"
    bad.write_bytes(b"this is not an image at all")
    return "dog/zz_bad.jpg"


def test_bad_image_skipped_and_reported(photos, tmp_path):
    bad = _add_bad_image(photos)
    summary = pack_dataset(photos, tmp_path / "o", resize=10)
    assert not summary.ok
    assert summary.failed == 1 and summary.written == len(CLASSES) * PER_CLASS
    assert [e["path"] for e in summary.errors] == [bad]
    assert summary.unusual["unreadable"]["examples"] == [bad]
    assert len(_records(str(tmp_path / "o.rec"))) == summary.written


def test_cli_exit_status_and_json(photos, tmp_path, capsys):
    bad = _add_bad_image(photos)
    assert main(["pack", str(photos), str(tmp_path / "o"), "--resize", "10", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["errors"][0]["path"] == bad and report["written"] == len(CLASSES) * PER_CLASS
    assert main(["pack", str(photos), str(tmp_path / "o"), "--resize", "10",
                 "--tolerate-errors"]) == 0
    assert bad in capsys.readouterr().out


def test_cli_text_summary(photos, tmp_path, capsys):
    assert main(["pack", str(photos), str(tmp_path / "o"), "--pass-through", "--shards", "2",
                 "--val-ratio", "0.5", "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "train: 6 records" in out and "val: 6 records" in out
    assert (tmp_path / "o_val-00001-of-00002.rec").exists()


def test_unusual_inputs_reported(photos, tmp_path):
    (photos / "cat" / "prog.jpg").write_bytes(_jpeg(30, 30, 9, IMWRITE_JPEG_PROGRESSIVE=1))
    ok, png = cv2.imencode(".png", np.zeros((8, 8, 3), np.uint8))
    (photos / "eel" / "fake.jpg").write_bytes(png.tobytes())
    summary = pack_dataset(photos, tmp_path / "o", pass_through=True)
    assert summary.ok
    assert summary.unusual["progressive"]["examples"] == ["cat/prog.jpg"]
    assert summary.unusual["not-jpeg"]["count"] == 1


def test_on_error_raise_publishes_nothing(photos, tmp_path):
    _add_bad_image(photos)
    with pytest.raises(DecodeError, match="zz_bad.jpg"):
        pack_dataset(photos, tmp_path / "out" / "o", resize=10, on_error="raise", shuffle=False)
    assert [n for n in os.listdir(tmp_path / "out") if not n.startswith(".")] == [
        "o.pack-plan.json"]


class _Stop(Exception):
    pass


def _stop_after(count):
    def progress(done, total, input_bytes):
        if done >= count:
            raise _Stop(done)
    return progress


@pytest.mark.parametrize("shards,stop_at", [(0, 5), (3, 6), (3, 4)])
def test_resume_is_byte_identical(photos, tmp_path, shards, stop_at):
    _add_bad_image(photos)  # a skipped item inside the plan must not confuse resuming
    args = dict(resize=14, shards=shards, seed=4, flush_every=1)
    clean = pack_dataset(photos, tmp_path / "clean" / "o", **args)
    with pytest.raises(_Stop):
        pack_dataset(photos, tmp_path / "run" / "o", progress=_stop_after(stop_at), **args)
    published = [n for n in os.listdir(tmp_path / "run") if n.endswith(".rec")]
    assert "o.rec" not in published and "o-00002-of-00003.rec" not in published
    resumed = pack_dataset(photos, tmp_path / "run" / "o", resume=True, **args)
    assert resumed.resumed_records > 0
    assert resumed.written + resumed.resumed_records == clean.written
    assert _files(tmp_path / "run") == _files(tmp_path / "clean")
    assert any(name.endswith(".sums") for name in _files(tmp_path / "clean"))  # sums resumed too
    for name in _files(tmp_path / "clean"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()


def test_resume_after_kill_9(photos, tmp_path):
    args = dict(resize=14, shards=2, flush_every=1)
    pack_dataset(photos, tmp_path / "clean" / "o", **args)
    code = textwrap.dedent(f"""
        import os, signal
        from recpipe.packing.packer import pack_dataset
        def progress(done, total, nbytes):
            if done == 9:
                os.kill(os.getpid(), signal.SIGKILL)
        pack_dataset({str(photos)!r}, {str(tmp_path / 'run' / 'o')!r}, progress=progress,
                     workers=0, **{args!r})
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "run" / "o-00001-of-00002.rec").exists()
    resumed = pack_dataset(photos, tmp_path / "run" / "o", resume=True, **args)
    assert resumed.resumed_records >= 6
    for name in _files(tmp_path / "clean"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
    assert not [n for n in os.listdir(tmp_path / "run") if n.startswith(".")]


def test_resume_refuses_a_different_job(photos, tmp_path):
    with pytest.raises(_Stop):
        pack_dataset(photos, tmp_path / "o", resize=14, progress=_stop_after(2))
    with pytest.raises(ValueError, match="different inputs or options"):
        pack_dataset(photos, tmp_path / "o", resize=20, resume=True)


def test_resume_of_a_finished_job_starts_over(photos, tmp_path):
    first = pack_dataset(photos, tmp_path / "o", pass_through=True)
    again = pack_dataset(photos, tmp_path / "o", pass_through=True, resume=True)
    assert again.written == first.written and again.resumed_records == 0


def test_memory_output_readable(photos):
    fs = fsspec.filesystem("memory")
    try:
        summary = pack_dataset(photos, "memory://packtest/o", resize=10, shards=2)
        assert summary.ok
        keys = []
        for shard in summary.splits["all"]:
            with recpipe.RecordReader(shard.rec) as reader:
                keys += list(reader.keys)
                assert recpipe.unpack_img(reader[0])[1].shape[2] == 3
        assert sorted(keys) == list(range(len(CLASSES) * PER_CLASS))
        assert fs.exists("/packtest/o.labels.json")
        assert not fs.exists("/packtest/o.pack-plan.json")
    finally:
        if fs.exists("/packtest"):
            fs.rm("/packtest", recursive=True)


def test_memory_output_failure_leaves_nothing(photos):
    fs = fsspec.filesystem("memory")
    try:
        with pytest.raises(_Stop):
            pack_dataset(photos, "memory://packfail/o", pass_through=True,
                         progress=_stop_after(3))
        assert [p.rsplit("/", 1)[1] for p in fs.find("/packfail")] == ["o.pack-plan.json"]
    finally:
        if fs.exists("/packfail"):
            fs.rm("/packfail", recursive=True)


def test_worker_processes_equal_serial(photos, tmp_path):
    _add_bad_image(photos)
    serial = pack_dataset(photos, tmp_path / "s" / "o", resize=12, workers=0, shards=2)
    parallel = pack_dataset(photos, tmp_path / "p" / "o", resize=12, workers=2, shards=2,
                            chunksize=2)
    assert parallel.workers == 2 and serial.workers == 0
    assert parallel.errors == serial.errors
    assert [e["shard"] for e in serial.errors] == ["o-00001-of-00002.rec"]
    for name in ("-00000-of-00002.rec", "-00001-of-00002.rec", "-00001-of-00002.idx"):
        assert (tmp_path / "p" / f"o{name}").read_bytes() == \
            (tmp_path / "s" / f"o{name}").read_bytes()


def _die(chunk):
    os._exit(3)


def _slow(chunk):
    import time

    time.sleep(30)


@pytest.mark.parametrize("work,error,match", [(_die, RuntimeError, "worker process died"),
                                              (_slow, TimeoutError, "no result")])
def test_worker_death_or_hang_is_an_error_not_a_hang(work, error, match):
    from concurrent.futures import ProcessPoolExecutor

    from recpipe.packing import runners

    executor = ProcessPoolExecutor(1, mp_context=runners.mp_context(False))
    try:
        with pytest.raises(error, match=match):
            list(runners.ordered_results(executor, work, [[1], [2]], 2, 0.5))
    finally:
        runners.stop_workers(executor)


def test_no_fork_after_opencv_was_imported():
    from recpipe.packing import runners

    assert "cv2" in sys.modules  # this test module uses it
    assert runners.mp_context(False).get_start_method() != "fork"


def test_an_output_named_dot_rec_is_the_rec_file(photos, tmp_path):
    """`recpipe pack SRC out/train.rec` writes out/train.rec + out/train.idx, not train.rec.rec."""
    assert main(["pack", str(photos), str(tmp_path / "a" / "train.rec"), "--resize", "16",
                 "--workers", "0", "--no-progress"]) == 0
    assert _files(tmp_path / "a") == ["train.idx", "train.labels.json", "train.rec",
                                      "train.sources.jsonl", "train.sums"]
    pack_dataset(photos, str(tmp_path / "b" / "train"), resize=16, workers=0)
    assert (tmp_path / "a" / "train.rec").read_bytes() == \
        (tmp_path / "b" / "train.rec").read_bytes()


@pytest.mark.parametrize("out", ["", "out/", "s3://bucket/"])
def test_an_output_prefix_must_name_a_file(photos, tmp_path, out):
    with pytest.raises(ValueError, match="names no file"):
        pack_dataset(photos, out, resize=16, workers=0)
