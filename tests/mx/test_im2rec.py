"""``recpipe im2rec`` without mxnet: list making, packing, bad images, parallel packing, atomicity.

Expected values are computed independently from im2rec.py's documented rules (sorted walk,
``random.seed(100)`` shuffle, ``'%d\\t%f\\t%s\\n'`` lines, OpenCV read/crop/resize/encode).
"""

import os
import random
import struct

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.cli import main
from recpipe.packing import shards
from recpipe.mx.im2rec import find_list_files, im2rec_options, pack_list
from recpipe.packing.listing import make_lists

# name -> (height, width); extension decides the encoding
TREE = {
    "top.jpg": (30, 40),
    "animals/cat 1.jpg": (40, 30),
    "animals/dog.JPG": (36, 36),
    "animals/small/mouse.png": (24, 44),
    "plants/fern.jpeg": (50, 28),
    "plants/moss.png": (28, 28),
    "plants/notes.txt": None,
    "empty/readme.md": None,
}


def write_image(path, shape, seed):
    rng = np.random.default_rng(seed)
    h, w = shape
    gradient = np.linspace(0, 255, w, dtype=np.float32)[None, :, None]
    img = np.clip(gradient + rng.normal(0, 20, (h, w, 3)), 0, 255).astype(np.uint8)
    ext = ".png" if path.lower().endswith(".png") else ".jpg"
    ok, buf = cv2.imencode(ext, img)
    assert ok
    with open(path, "wb") as f:
        f.write(buf.tobytes())


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "images"
    for seed, (name, shape) in enumerate(TREE.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if shape is None:
            path.write_text("not an image")
        else:
            write_image(str(path), shape, seed)
    return root


def read_lst(path):
    lines = path.read_text().splitlines()
    rows = [line.split("\t") for line in lines]
    return [(int(r[0]), [float(x) for x in r[1:-1]], r[-1]) for r in rows]


def sorted_walk(root):
    """Independent re-statement of im2rec's traversal: sorted pre-order walk."""
    found = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if os.path.splitext(name)[1].lower() in (".jpg", ".jpeg", ".png"):
                found.append((os.path.relpath(directory, root), name))
    return found


# ---------------------------------------------------------------- list mode

def test_flat_list_only_root_images_label_zero_shuffled_with_seed_100(tree, tmp_path):
    (tree / "b.png").write_bytes((tree / "animals/small/mouse.png").read_bytes())
    assert main(["im2rec", "--list", str(tmp_path / "data"), str(tree)]) == 0
    expected = [(i, name) for i, name in enumerate(["b.png", "top.jpg"])]
    random.seed(100)
    random.shuffle(expected)
    text = (tmp_path / "data.lst").read_text()
    assert text == "".join("%d\t0.000000\t%s\n" % item for item in expected)


def test_recursive_labels_follow_directories_and_map_is_printed(tree, tmp_path, capsys):
    assert main(["im2rec", "--list", "--recursive", "--no-shuffle",
                 str(tmp_path / "data"), str(tree)]) == 0
    walk = sorted_walk(str(tree))
    dir_labels = {}
    for directory, _ in walk:
        dir_labels.setdefault(directory, len(dir_labels))
    expected = [(i, float(dir_labels[d]), os.path.join(d, n) if d != "." else n)
                for i, (d, n) in enumerate(walk)]
    rows = [(i, labels[0], path) for i, labels, path in read_lst(tmp_path / "data.lst")]
    assert rows == expected
    assert dir_labels == {".": 0, "animals": 1, "animals/small": 2, "plants": 3}
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"{d} {label}" for d, label in dir_labels.items()]


def test_list_lines_use_im2rec_format_and_keep_spaces(tree, tmp_path):
    main(["im2rec", "--list", "--recursive", "--no-shuffle", str(tmp_path / "d"), str(tree)])
    lines = (tmp_path / "d.lst").read_text().splitlines(keepends=True)
    assert lines[1] == "1\t1.000000\tanimals/cat 1.jpg\n"
    assert all(line.count("\t") == 2 and line.endswith("\n") for line in lines)


def test_chunks_split_ceil_and_cover_every_image(tree, tmp_path):
    main(["im2rec", "--list", "--recursive", "--chunks", "3", str(tmp_path / "d"), str(tree)])
    n = len(sorted_walk(str(tree)))
    sizes = [len(read_lst(tmp_path / f"d_{i}.lst")) for i in range(3)]
    chunk = -(-n // 3)
    assert sizes == [min(chunk, max(n - i * chunk, 0)) for i in range(3)]
    indices = sorted(i for c in range(3) for i, _, _ in read_lst(tmp_path / f"d_{c}.lst"))
    assert indices == list(range(n))
    assert not (tmp_path / "d.lst").exists()


def test_train_test_val_split_sizes(tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(10):
        write_image(str(root / f"img{i:02d}.jpg"), (8, 8), i)
    main(["im2rec", "--list", "--train-ratio", "0.8", "--test-ratio", "0.1",
          str(tmp_path / "d"), str(root)])
    parts = {name: read_lst(tmp_path / f"d_{name}.lst") for name in ("train", "test", "val")}
    assert {k: len(v) for k, v in parts.items()} == {"train": 8, "test": 1, "val": 1}
    shuffled = list(range(10))
    random.seed(100)
    random.shuffle(shuffled)
    order = [i for name in ("test", "train", "val") for i, _, _ in parts[name]]
    assert order == shuffled
    assert not (tmp_path / "d.lst").exists()


def test_train_ratio_one_ignores_test_ratio(tree, tmp_path):
    main(["im2rec", "--list", "--test-ratio", "0.5", str(tmp_path / "d"), str(tree)])
    assert sorted(p.name for p in tmp_path.glob("d*.lst")) == ["d.lst"]


def test_exts_filter_is_case_insensitive_on_files(tree, tmp_path):
    main(["im2rec", "--list", "--recursive", "--no-shuffle",
          str(tmp_path / "d"), str(tree), "--exts", ".jpg"])
    paths = [p for _, _, p in read_lst(tmp_path / "d.lst")]
    assert paths == ["top.jpg", "animals/cat 1.jpg", "animals/dog.JPG"]


def test_list_mode_leaves_global_random_state_alone(tree, tmp_path):
    random.seed(7)
    state = random.getstate()
    make_lists(tmp_path / "d", tree)
    assert random.getstate() == state


# ---------------------------------------------------------------- pack mode

def write_lst(path, rows):
    with open(path, "w") as f:
        for index, labels, rel in rows:
            f.write("%d\t" % index + "".join("%f\t" % x for x in labels) + rel + "\n")


def records_by_key(rec_path):
    with recpipe.RecordReader(str(rec_path)) as reader:
        return [(key, reader.read_key(key)) for key in reader.keys]


def test_pass_through_stores_file_bytes_with_lst_index_as_id_and_key(tree, tmp_path):
    rows = [(5, [2.0], "plants/fern.jpeg"), (1, [0.0], "top.jpg"), (9, [1.0], "animals/cat 1.jpg")]
    write_lst(tmp_path / "d.lst", rows)
    assert main(["im2rec", "--pass-through", str(tmp_path / "d"), str(tree)]) == 0
    got = records_by_key(tmp_path / "d.rec")
    assert [key for key, _ in got] == [5, 1, 9]
    for (index, labels, rel), (_, payload) in zip(rows, got):
        expected = struct.pack("<IfQQ", 0, labels[0], index, 0) + (tree / rel).read_bytes()
        assert payload == expected


def im2rec_pixels(path, color, center_crop, resize):
    """im2rec.py's image_encode steps, restated with OpenCV directly."""
    img = cv2.imread(str(path), color)
    if center_crop:
        h, w = img.shape[:2]
        m = abs(h - w) // 2
        img = img[m:m + w] if h > w else img[:, m:m + h]
    if resize:
        h, w = img.shape[:2]
        size = (resize, h * resize // w) if h > w else (w * resize // h, resize)
        img = cv2.resize(img, size)
    return img


@pytest.mark.parametrize("color,center_crop,resize,encoding", [
    (1, False, 0, ".jpg"), (1, True, 20, ".jpg"), (0, False, 16, ".png"), (-1, True, 0, ".png")])
def test_reencode_matches_opencv_pipeline(tree, tmp_path, color, center_crop, resize, encoding):
    rows = [(0, [0.0], "animals/cat 1.jpg"), (1, [1.0], "animals/small/mouse.png")]
    write_lst(tmp_path / "d.lst", rows)
    args = ["im2rec", "--color", str(color), "--encoding", encoding, "--quality", "90"]
    args += ["--center-crop"] * center_crop + ["--resize", str(resize)]
    assert main(args + [str(tmp_path / "d"), str(tree)]) == 0
    for (_, _, rel), (_, payload) in zip(rows, records_by_key(tmp_path / "d.rec")):
        header, image = recpipe.unpack(payload)
        img = im2rec_pixels(tree / rel, color, center_crop, resize)
        params = ([cv2.IMWRITE_JPEG_QUALITY, 90] if encoding == ".jpg"
                  else [cv2.IMWRITE_PNG_COMPRESSION, 9])
        assert image == cv2.imencode(encoding, img, params)[1].tobytes()


def jpeg_with_orientation(img, orientation):
    entry = struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0)
    tiff = b"II*\x00" + struct.pack("<IH", 8, 1) + entry + struct.pack("<I", 0)
    body = b"Exif\x00\x00" + tiff
    jpeg = cv2.imencode(".jpg", img)[1].tobytes()
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + jpeg[2:]


@pytest.mark.parametrize("color", [1, 0, -1])
def test_decode_follows_imread_exif_orientation(tmp_path, color):
    img = np.zeros((16, 32, 3), np.uint8)
    img[:, :8] = 255
    (tmp_path / "rot.jpg").write_bytes(jpeg_with_orientation(img, 6))
    write_lst(tmp_path / "d.lst", [(0, [0.0], "rot.jpg")])
    assert main(["im2rec", "--encoding", ".png", "--color", str(color),
                 str(tmp_path / "d"), str(tmp_path)]) == 0
    (_, payload), = records_by_key(tmp_path / "d.rec")
    decoded = cv2.imdecode(np.frombuffer(recpipe.unpack(payload)[1], np.uint8), -1)
    expected = cv2.imread(str(tmp_path / "rot.jpg"), color)
    assert decoded.shape == expected.shape
    assert np.array_equal(decoded, expected)


def test_pack_label_stores_all_labels_only_for_multi_label_lines(tree, tmp_path):
    rows = [(0, [1.0, 2.5, 3.0], "top.jpg"), (1, [4.0], "plants/moss.png")]
    write_lst(tmp_path / "d.lst", rows)
    main(["im2rec", "--pass-through", "--pack-label", str(tmp_path / "d"), str(tree)])
    (_, first), (_, second) = records_by_key(tmp_path / "d.rec")
    h1, img1 = recpipe.unpack(first)
    assert h1.flag == 3 and list(h1.label) == [1.0, 2.5,
                                               3.0] and img1 == (tree / "top.jpg").read_bytes()
    h2, _ = recpipe.unpack(second)
    assert (h2.flag, h2.label) == (0, 4.0)
    main(["im2rec", "--pass-through", str(tmp_path / "d"), str(tree)])
    h1, _ = recpipe.unpack(records_by_key(tmp_path / "d.rec")[0][1])
    assert (h1.flag, h1.label) == (0, 1.0)


def test_prefix_packs_every_matching_list(tree, tmp_path):
    for name in ("data", "data_train", "dataset", "other"):
        write_lst(tmp_path / f"{name}.lst", [(0, [0.0], "top.jpg")])
    (tmp_path / "data_notes.txt").write_text("x")
    found = [os.path.basename(p) for p in find_list_files(str(tmp_path / "data"))]
    assert found == ["data.lst", "data_train.lst", "dataset.lst"]
    assert main(["im2rec", "--pass-through", str(tmp_path / "data"), str(tree)]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.rec")) == ["data.rec", "data_train.rec",
                                                              "dataset.rec"]


def test_no_list_found_is_an_error(tmp_path, capsys):
    assert main(["im2rec", str(tmp_path / "nothing"), str(tmp_path)]) == 1
    assert "no .lst file" in capsys.readouterr().err


def bad_tree(tree):
    (tree / "broken.jpg").write_bytes(b"\xff\xd8 this is not a jpeg")
    return [(0, [0.0], "top.jpg"), (1, [1.0], "broken.jpg"), (2, [2.0], "missing.png"),
            (3, [3.0], "plants/moss.png")]


def test_bad_images_are_skipped_reported_and_exit_nonzero(tree, tmp_path, capsys):
    write_lst(tmp_path / "d.lst", bad_tree(tree))
    status = main(["im2rec", str(tmp_path / "d"), str(tree)])
    assert status != 0
    err = capsys.readouterr().err
    assert str(tree / "broken.jpg") in err and str(tree / "missing.png") in err
    assert [key for key, _ in records_by_key(tmp_path / "d.rec")] == [0, 3]


def test_skip_errors_exits_zero_with_same_output(tree, tmp_path):
    write_lst(tmp_path / "d.lst", bad_tree(tree))
    assert main(["im2rec", "--skip-errors", str(tmp_path / "d"), str(tree)]) == 0
    assert [key for key, _ in records_by_key(tmp_path / "d.rec")] == [0, 3]


def test_unparsable_list_line_is_skipped_and_counted(tree, tmp_path):
    (tmp_path / "d.lst").write_text(
        "0\t0.000000\ttop.jpg\nx\t1.0\tplants/moss.png\nonly-two\tfields\n")
    result = pack_list(str(tmp_path / "d.lst"), str(tree), im2rec_options(pass_through=True))
    assert result.written == 1
    assert [s.reason for s in result.skipped] == [
        "line 2 of the list does not parse", "line 3 of the list does not parse"]


def test_missing_file_is_skipped_in_pass_through(tree, tmp_path):
    write_lst(tmp_path / "d.lst", [(0, [0.0], "gone.jpg"), (1, [0.0], "top.jpg")])
    result = pack_list(str(tmp_path / "d.lst"), str(tree), im2rec_options(pass_through=True))
    assert result.written == 1
    assert result.skipped[0].path == str(tree / "gone.jpg") and result.skipped[0].index == 0
    assert "FileNotFoundError" in result.skipped[0].reason


def test_parallel_output_equals_serial(tree, tmp_path):
    rows = bad_tree(tree)
    rows += [(10 + i, [float(i)], rel) for i, rel in enumerate(
        ["animals/cat 1.jpg", "animals/dog.JPG", "plants/fern.jpeg",
         "animals/small/mouse.png"] * 5)]
    write_lst(tmp_path / "serial.lst", rows)
    write_lst(tmp_path / "parallel.lst", rows)
    common = ["--resize", "18", "--center-crop", "--skip-errors"]
    assert main(["im2rec", *common, str(tmp_path / "serial"), str(tree)]) == 0
    assert main(["im2rec", *common, "--num-thread", "2", str(tmp_path / "parallel"),
                 str(tree)]) == 0
    assert (tmp_path / "serial.rec").read_bytes() == (tmp_path / "parallel.rec").read_bytes()
    assert (tmp_path / "serial.idx").read_bytes() == (tmp_path / "parallel.idx").read_bytes()
    assert len(records_by_key(tmp_path / "parallel.rec")) == len(rows) - 2


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.suffix in (".rec", ".idx", ".tmp"))


def test_failure_midway_publishes_nothing_and_keeps_old_output(tree, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    write_lst(out / "d.lst", [(i, [0.0], "top.jpg") for i in range(5)])
    (out / "d.rec").write_bytes(b"old")
    real = shards.ShardWriter.write
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("disk on fire")
        return real(*args, **kwargs)

    monkeypatch.setattr(shards.ShardWriter, "write", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        main(["im2rec", str(out / "d"), str(tree)])
    assert leftovers(out) == ["d.rec"]
    assert (out / "d.rec").read_bytes() == b"old"


@pytest.mark.parametrize("workers", [1, 2])
def test_interrupt_publishes_nothing_and_stops_workers(tree, tmp_path, workers):
    write_lst(tmp_path / "d.lst", [(i, [0.0], "top.jpg") for i in range(40)])

    def interrupt(done, total):
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pack_list(str(tmp_path / "d.lst"), str(tree), num_workers=workers, progress=interrupt)
    assert leftovers(tmp_path) == []


def test_invalid_options_fail_before_packing():
    with pytest.raises(ValueError, match="encoding"):
        im2rec_options(encoding=".bmp")
    with pytest.raises(ValueError, match="color"):
        im2rec_options(color=2)


def test_names_with_unusual_line_breaks_survive_list_and_pack(tree, tmp_path):
    """im2rec reads .lst lines with universal newlines only: \\f or U+2028 stay in the path."""
    for name in ("form\x0cfeed.jpg", "line\u2028sep.jpg"):
        (tree / name).write_bytes((tree / "top.jpg").read_bytes())
    assert main(["im2rec", "--list", "--no-shuffle", str(tmp_path / "d"), str(tree)]) == 0
    assert main(["im2rec", "--pass-through", str(tmp_path / "d"), str(tree)]) == 0
    images = [recpipe.unpack(payload)[1] for _, payload in records_by_key(tmp_path / "d.rec")]
    assert images == [(tree / n).read_bytes() for n in ("form\x0cfeed.jpg", "line\u2028sep.jpg",
                                                        "top.jpg")]


# ---------------------------------------------------------------- one pack engine

def test_im2rec_is_a_preset_of_pack_options():
    from recpipe.packing.options import PackOptions

    options = im2rec_options(resize=32)
    assert type(options) is PackOptions and options.resize == 32
    assert (options.exact, options.keep_jpeg, options.shuffle, options.sources,
            options.labels_file, options.resumable) == (True, False, False, False, False, False)
    assert options.limits.allow_outside_root


def test_im2rec_packs_through_the_pack_engine(tree, tmp_path, monkeypatch):
    from recpipe.mx import im2rec
    from recpipe.packing import packer

    calls = []

    def spy(src, out, options=None, **keywords):
        calls.append((src, out, options.workers))
        return packer.pack_dataset(src, out, options, **keywords)

    monkeypatch.setattr(im2rec, "pack_dataset", spy)
    write_lst(tmp_path / "d.lst", [(0, [0.0], "top.jpg"), (1, [1.0], "plants/moss.png")])
    result = pack_list(str(tmp_path / "d.lst"), str(tree), num_workers=2)
    assert calls == [(str(tmp_path / "d.lst"), str(tmp_path / "d"), 2)] and result.written == 2
    assert sorted(p.name for p in tmp_path.glob("d.*")) == ["d.idx", "d.lst", "d.rec", "d.sums"]


def test_an_interrupted_im2rec_leaves_nothing_behind(tree, tmp_path):
    write_lst(tmp_path / "d.lst", [(i, [0.0], "top.jpg") for i in range(20)])

    def interrupt(done, total):
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pack_list(str(tmp_path / "d.lst"), str(tree), progress=interrupt)
    assert sorted(p.name for p in tmp_path.glob("*d.*")) == ["d.lst"]  # no journal, no partition
