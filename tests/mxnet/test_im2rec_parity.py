"""``recpipe im2rec`` against mxnet 1.9.1's ``tools/im2rec.py`` on the same image tree.

Each im2rec invocation is run twice, in separate folders: by the real im2rec.py (one mxnet
subprocess runs them all) and by ``recpipe.cli.main``. Then: lists and pass-through records must
be byte-identical, re-encoded records equal up to OpenCV version differences, mxnet must read our
records (MXIndexedRecordIO, ImageRecordIter) and we must read im2rec's.
"""

import contextlib
import io
import shutil

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.packing.listing import make_lists

from .conftest import unb64

pytestmark = pytest.mark.mxnet

LIST_VARIANTS = {
    "plain": [],
    "recursive": ["--recursive"],
    "chunks": ["--recursive", "--chunks", "3"],
    "split": ["--recursive", "--train-ratio", "0.8", "--test-ratio", "0.1"],
    "no_shuffle": ["--recursive", "--no-shuffle"],
    "exts": ["--recursive", "--exts", ".png", ".jpeg"],
}

PACK_VARIANTS = {
    "pass_through": ("single", ["--pass-through"]),
    "reencode": ("single", ["--resize", "20", "--center-crop"]),
    "gray_png": ("single", ["--resize", "16", "--encoding", ".png", "--color", "0", "--quality",
                            "3"]),
    "multi": ("multi", ["--pack-label", "--resize", "20", "--center-crop", "--quality", "90"]),
    "multi_pass_through": ("multi", ["--pass-through", "--pack-label"]),
}
REENCODED = ["reencode", "gray_png", "multi"]
LABEL_WIDTH = 3


def write_lists(folder, root, kind):
    """The same .lst for both runs: im2rec's recursive list, or a 3-label variant of it."""
    folder.mkdir(parents=True)
    make_lists(folder / "data", root, recursive=True)
    if kind == "multi":
        lines = (folder / "data.lst").read_text().splitlines()
        rows = [line.split("\t") for line in lines]
        (folder / "data.lst").write_text("".join(
            "%s\t%s\t%f\t%f\t%s\n" % (r[0], r[1], int(r[0]) * 0.5, -int(r[0]), r[2]) for r in rows))


def run_ours(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["im2rec", *argv])
    return {"stdout": out.getvalue(), "status": status}


@pytest.fixture(scope="module")
def runs(mx, image_tree, tmp_path_factory):
    """Run every variant with im2rec.py (folder ``mx/<name>``) and recpipe (``ours/<name>``)."""
    base = tmp_path_factory.mktemp("im2rec")
    argvs = {}
    for name, extra in LIST_VARIANTS.items():
        for side in ("mx", "ours"):
            (base / side / name).mkdir(parents=True)
        argvs[name] = ["--list", "PREFIX", str(image_tree), *extra]
    for name, (kind, extra) in PACK_VARIANTS.items():
        for side in ("mx", "ours"):
            write_lists(base / side / name, image_tree, kind)
        argvs[name] = ["PREFIX", str(image_tree), *extra]

    def with_prefix(side, name):
        return [str(base / side / name / "data") if a == "PREFIX" else a for a in argvs[name]]

    names = list(argvs)
    theirs = mx("im2rec", {"runs": [with_prefix("mx", name) for name in names]})["runs"]
    ours = {name: run_ours(with_prefix("ours", name)) for name in names}
    for name, result in zip(names, theirs):
        assert result["error"] is None, f"im2rec.py failed on {name}: {result['error']}"
        assert ours[name]["status"] == 0, name
    return {"base": base, "theirs": dict(zip(names, theirs)), "ours": ours}


def folder_files(folder, suffixes):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix in suffixes}


@pytest.mark.parametrize("variant", list(LIST_VARIANTS))
def test_list_files_are_byte_identical(runs, variant):
    theirs = folder_files(runs["base"] / "mx" / variant, {".lst"})
    ours = folder_files(runs["base"] / "ours" / variant, {".lst"})
    assert theirs and sorted(ours) == sorted(theirs)
    assert ours == theirs
    assert runs["ours"][variant]["stdout"] == runs["theirs"][variant]["stdout"]


def test_list_variants_cover_the_interesting_cases(runs):
    base = runs["base"] / "mx"
    assert sorted(p.name for p in (base / "chunks").iterdir()) == ["data_0.lst", "data_1.lst",
                                                                   "data_2.lst"]
    assert sorted(p.name for p in (base / "split").iterdir()) == [
        "data_test.lst", "data_train.lst", "data_val.lst"]
    recursive = (base / "recursive" / "data.lst").read_text()
    assert "beta/with space.jpg" in recursive and "alpha/Two.JPG" in recursive
    assert "alpha/deep/three.png" in recursive
    assert runs["theirs"]["recursive"]["stdout"].splitlines()[:2] == [". 0", "alpha 1"]


@pytest.mark.parametrize("variant", ["pass_through", "multi_pass_through"])
def test_pass_through_records_are_byte_identical(runs, variant):
    theirs = folder_files(runs["base"] / "mx" / variant, {".rec", ".idx"})
    ours = folder_files(runs["base"] / "ours" / variant, {".rec", ".idx"})
    assert sorted(theirs) == ["data.idx", "data.rec"]
    assert ours == theirs


def decode(image):
    return cv2.imdecode(np.frombuffer(image, np.uint8), cv2.IMREAD_UNCHANGED)


def read_all(rec_path):
    with recpipe.RecordReader(str(rec_path)) as reader:
        return list(reader.keys), [recpipe.unpack(reader.read_key(k)) for k in reader.keys]


@pytest.mark.parametrize("variant", REENCODED)
def test_reencoded_records_match_within_opencv_tolerance(runs, variant):
    their_keys, theirs = read_all(runs["base"] / "mx" / variant / "data.rec")
    our_keys, ours = read_all(runs["base"] / "ours" / variant / "data.rec")
    assert our_keys == their_keys and len(ours) == len(theirs) > 0
    for (our_header, our_image), (their_header, their_image) in zip(ours, theirs):
        assert our_header.flag == their_header.flag
        assert np.array_equal(our_header.label, their_header.label)
        assert (our_header.id, our_header.id2) == (their_header.id, their_header.id2)
        a, b = decode(our_image).astype(int), decode(their_image).astype(int)
        assert a.shape == b.shape
        assert np.abs(a - b).mean() < 1.0 and np.abs(a - b).max() <= 16


@pytest.mark.parametrize("variant", list(PACK_VARIANTS))
def test_we_read_what_im2rec_wrote_like_mx_recordio(runs, mx, variant):
    rec = runs["base"] / "mx" / variant / "data.rec"
    theirs, = mx("read-indexed", {"files": [[str(rec), str(rec.with_suffix(".idx"))]]})["files"]
    keys, ours = read_all(rec)
    assert keys == theirs["keys"]
    assert theirs["sequential"] == len(keys) > 0
    for (header, image), their in zip(ours, theirs["records"]):
        assert (header.flag, header.id, header.id2) == (their["flag"], their["id"], their["id2"])
        assert np.asarray(header.label).tolist() == their["label"]
        assert image == unb64(their["image"])


@pytest.mark.parametrize("variant", list(PACK_VARIANTS))
def test_mx_recordio_reads_what_recpipe_im2rec_wrote(runs, mx, variant):
    rec = runs["base"] / "ours" / variant / "data.rec"
    theirs, = mx("read-indexed", {"files": [[str(rec), str(rec.with_suffix(".idx"))]]})["files"]
    with recpipe.RecordReader(str(rec)) as reader:
        assert theirs["keys"] == list(reader.keys)
        assert [unb64(r["payload"]) for r in theirs["records"]] == \
            [reader.read_key(k) for k in reader.keys]


def test_our_sidecar_describes_im2rec_pys_pass_through_output(runs, tmp_path):
    """The .rec bytes are MXNet's, so the sidecar recpipe im2rec wrote checks MXNet's file."""
    for name in ("data.rec", "data.idx"):
        shutil.copy(runs["base"] / "mx" / "pass_through" / name, tmp_path / name)
    shutil.copy(runs["base"] / "ours" / "pass_through" / "data.sums", tmp_path / "data.sums")
    with recpipe.RecordReader(str(tmp_path / "data.rec")) as reader:
        assert reader.sums is not None and len(reader.sums) == len(reader) > 0
        assert all(reader[i] for i in range(len(reader)))  # every sum matches


def test_mxnet_reads_a_recpipe_pack_with_its_sidecar(mx, tmp_path):
    from recpipe.packing.packer import pack_dataset

    from .._damage import textured_jpeg

    for i in range(6):
        folder = tmp_path / "src" / "ab"[i % 2]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i}.jpg").write_bytes(textured_jpeg(i, (30 + i, 40)))
    pack_dataset(str(tmp_path / "src"), str(tmp_path / "p"), pass_through=True, workers=0)
    rec = tmp_path / "p.rec"
    assert (tmp_path / "p.sums").exists()
    theirs, = mx("read-indexed", {"files": [[str(rec), str(tmp_path / "p.idx")]]})["files"]
    with recpipe.RecordReader(str(rec)) as reader:
        assert reader.sums is not None
        assert theirs["keys"] == list(reader.keys) and theirs["sequential"] == len(reader)
        assert [unb64(r["payload"]) for r in theirs["records"]] == \
            [reader.read_key(k) for k in reader.keys]


def expected_from_list(lst_path, label_width):
    rows = [line.split("\t") for line in lst_path.read_text().splitlines()]
    return [[float(x) for x in row[1:1 + label_width]] for row in rows]


def rgb_means(rec_path):
    _, records = read_all(rec_path)
    return [decode(image)[..., ::-1].reshape(-1, 3).mean(axis=0) for _, image in records]


def test_image_record_iter_reads_recpipe_im2rec_output(runs, mx):
    single = runs["base"] / "ours" / "reencode"
    multi = runs["base"] / "ours" / "multi"
    common = {"data_shape": [3, 20, 20]}
    iter_runs = [
        dict(common, path_imgrec=str(single / "data.rec")),
        dict(common, path_imgrec=str(single / "data.rec"), path_imgidx=str(single / "data.idx")),
        dict(common, path_imgrec=str(multi / "data.rec"), path_imgidx=str(multi / "data.idx"),
             label_width=LABEL_WIDTH),
    ]
    assert (single / "data.sums").exists() and (multi / "data.sums").exists()  # MXNet ignores it
    results = mx("iter", {"runs": iter_runs})["runs"]
    expectations = [(single, 1), (single, 1), (multi, LABEL_WIDTH)]
    for result, (folder, width) in zip(results, expectations):
        expected = expected_from_list(folder / "data.lst", width)
        labels = [label if width > 1 else [label] for label in result["labels"]]
        assert labels == expected
        means = rgb_means(folder / "data.rec")
        assert len(result["means"]) == len(means)
        assert np.allclose(result["means"], means, atol=1.0)


def test_exif_orientation_is_applied_like_imread(runs):
    """im2rec's cv2.imread rotates by EXIF orientation; our decode of the bytes must do the same."""
    folder = runs["base"] / "ours" / "gray_png"
    rows = [line.split("\t") for line in (folder / "data.lst").read_text().splitlines()]
    index = next(int(row[0]) for row in rows if row[-1] == "gamma/rotated.jpg")
    shapes = []
    for side in ("mx", "ours"):
        with recpipe.RecordReader(str(runs["base"] / side / "gray_png" / "data.rec")) as reader:
            shapes.append(decode(recpipe.unpack(reader.read_key(index))[1]).shape)
    # stored 18 high x 40 wide, orientation 6 -> 40 x 18 -> shorter edge 16: 35 x 16
    assert shapes == [(40 * 16 // 18, 16)] * 2
