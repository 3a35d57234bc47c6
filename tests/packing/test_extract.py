"""``recpipe extract``: records out as files or tar shards, bytes unchanged, resumable, confined."""

import io
import json
import os
import tarfile
from pathlib import Path

import cv2
import fsspec
import numpy as np
import pytest

from recpipe.cli import main
from recpipe.errors import RecordFormatError
from recpipe.io.format.header import IRHeader, pack, unpack
from recpipe.io.reader import RecordReader
from recpipe.io.writer import RecordWriter
from recpipe.packing.extract import (extract_records, image_extension, label_folder,
                                     plan_chunks, record_name)
from recpipe.packing.inputs import UnsafeInput


def _jpeg(seed, shape=(20, 24)):
    rng = np.random.default_rng(seed)
    return cv2.imencode(".jpg", rng.integers(0, 255, shape + (3,), dtype=np.uint8))[1].tobytes()


def _png(seed):
    rng = np.random.default_rng(seed)
    return cv2.imencode(".png", rng.integers(0, 255, (9, 7, 3), dtype=np.uint8))[1].tobytes()


def write_labelled(url, count=12, multi=False):
    """A .rec of ``count`` images (JPEG, every 4th PNG) with labels i % 3 (and two more)."""
    records = []
    with RecordWriter(url) as writer:
        for i in range(count):
            image = _png(i) if i % 4 == 3 else _jpeg(i)
            label = [float(i % 3), i * 0.5, -float(i)] if multi else float(i % 3)
            payload = pack(IRHeader(0, label, i, 0), image)
            writer.write(payload, key=i)
            records.append(payload)
    return records


def write_faces(url, per_id=(2, 1, 3)):
    """InsightFace's layout: key 0 header, image keys 1..N, identity records after."""
    images, first = [], sum(per_id) + 1
    with RecordWriter(url) as writer:
        writer.write(pack(IRHeader(2, [first, first + len(per_id)], 0, 0), b""), key=0)
        key = 1
        for identity, count in enumerate(per_id):
            for _ in range(count):
                image = _jpeg(key)
                writer.write(pack(IRHeader(0, float(identity), key, 0), image), key=key)
                images.append((key, identity, image))
                key += 1
        start = 1
        for identity, count in enumerate(per_id):
            writer.write(pack(IRHeader(2, [start, start + count], 0, 0), b""), key=first + identity)
            start += count
    return images


def test_names_are_confined():
    assert label_folder(3.0) == "3" and label_folder(-1.0) == "-1" and label_folder(0.5) == "0.5"
    assert record_name(17, 4) == "17"
    for key in ("../x", "/etc/passwd", "a/b", ".hidden", "", "x" * 200):
        assert record_name(key, 4) == "record-4"
    assert image_extension(_jpeg(0)) == ".jpg" and image_extension(_png(0)) == ".png"
    assert image_extension(b"junk") == ".bin"
    assert plan_chunks([5, 5, 5, 5, 5], 10) == [(0, 2), (2, 4), (4, 5)]
    assert plan_chunks([1] * 5, 100, max_records=2) == [(0, 2), (2, 4), (4, 5)]


def test_folder_extract_keeps_bytes_and_lists_labels(tmp_path):
    records = write_labelled(str(tmp_path / "data.rec"), multi=True)
    out = tmp_path / "out"
    summary = extract_records(str(tmp_path / "data.rec"), str(out), shard_size=2000, workers=3)
    assert summary.images == len(records) and summary.chunks > 2
    lines = (out / "data.lst").read_text().splitlines()
    assert len(lines) == len(records)
    for line, payload in zip(lines, records):
        header, image = unpack(payload)
        fields = line.split("\t")
        assert int(fields[0]) == header.id
        assert [float(v) for v in fields[1:-1]] == pytest.approx(header.label.tolist())
        assert fields[-1].split("/")[0] == "%d" % header.label[0]
        assert (out / fields[-1]).read_bytes() == image
    files = [p for p in out.rglob("*") if p.is_file() and ".recpipe-extract" not in str(p)]
    assert len(files) == len(records) + 1  # the images and the list, nothing else


def test_round_trip_through_pack(tmp_path):
    records = write_labelled(str(tmp_path / "data.rec"), multi=True)
    extract_records(str(tmp_path / "data.rec"), str(tmp_path / "out"))
    assert main(["pack", str(tmp_path / "out" / "data.lst"), str(tmp_path / "again"),
                 "--pass-through", "--pack-label", "--no-progress", "--workers", "1"]) == 0
    with RecordReader(str(tmp_path / "again.rec")) as reader:
        assert list(reader) == records


def test_insightface_structure_is_left_out(tmp_path):
    images = write_faces(str(tmp_path / "faces.rec"))
    summary = extract_records(str(tmp_path / "faces.rec"), str(tmp_path / "out"))
    assert summary.images == len(images) and summary.skipped_records == 1 + 3
    for key, identity, image in images:
        assert (tmp_path / "out" / str(identity) / f"{key}.jpg").read_bytes() == image
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["0", "1", "2", "faces.lst"]


def test_tar_shards_on_memory_urls(tmp_path):
    src = "memory://extract-src/data.rec"
    records = write_labelled(src, count=10)
    summary = extract_records(src, "memory://extract-out/shards", format="tar", shard_size=1500)
    assert len(summary.shards) > 1 and summary.list_file is None
    fs = fsspec.filesystem("memory")
    seen = []
    for shard in summary.shards:
        with tarfile.open(fileobj=io.BytesIO(fs.cat(shard))) as tar:
            names = tar.getnames()
            for name in names:
                if name.endswith(".json"):
                    meta = json.loads(tar.extractfile(name).read())
                    stem = name[:-5]
                    image_name = next(n for n in names if n.startswith(stem + ".")
                                      and n.split(".", 1)[1] not in ("json", "cls"))
                    cls = tar.extractfile(stem + ".cls").read().decode()
                    seen.append((meta["position"], tar.extractfile(image_name).read(), cls))
    assert [s[0] for s in sorted(seen)] == list(range(10))
    for position, image, cls in seen:
        header, expected = unpack(records[position])
        assert image == expected and cls == "%d" % header.label


def test_resume_skips_done_chunks_and_refuses_another_file(tmp_path):
    write_labelled(str(tmp_path / "data.rec"), count=12)
    out = tmp_path / "out"
    _interrupted(str(tmp_path / "data.rec"), str(out))
    done = len(list((out / ".recpipe-extract").glob("chunk-*.json")))
    victim = out / "0" / "0.jpg"  # record 0: in chunk 0, which is done
    stamp = victim.stat().st_mtime_ns
    (out / "2" / ".5.jpg.0123abcd.tmp").write_bytes(b"half an image")  # the stopped run's
    again = extract_records(str(tmp_path / "data.rec"), str(out), shard_size=1500)
    assert not list(out.rglob("*.tmp"))
    assert again.chunks > done > 0
    assert again.resumed_chunks == done and again.images == 12
    assert victim.stat().st_mtime_ns == stamp
    write_labelled(str(tmp_path / "other.rec"), count=5)
    _interrupted(str(tmp_path / "data.rec"), str(tmp_path / "out2"))
    with pytest.raises(ValueError, match="another file"):
        extract_records(str(tmp_path / "other.rec"), str(tmp_path / "out2"))


def test_symlinked_label_folder_cannot_lead_outside(tmp_path):
    write_labelled(str(tmp_path / "data.rec"), count=3)
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(outside, out / "1")  # a label folder pointing out of OUT
    with pytest.raises(UnsafeInput, match="outside"):
        extract_records(str(tmp_path / "data.rec"), str(out), workers=1, overwrite=True)
    assert list(outside.iterdir()) == []


def test_cli_json(tmp_path, capsys):
    write_labelled(str(tmp_path / "data.rec"), count=4)
    assert main(["extract", str(tmp_path / "data.rec"), str(tmp_path / "out"), "--json",
                 "--format", "tar", "--shard-size", "1KB"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["images"] == 4 and summary["shards"]


def test_a_bad_record_stops_the_extract_without_publishing_a_list(tmp_path):
    write_labelled(str(tmp_path / "data.rec"), count=12)
    data = bytearray((tmp_path / "data.rec").read_bytes())
    with RecordReader(str(tmp_path / "data.rec")) as reader:
        start, _ = reader.span(9)
    data[start:start + 4] = b"XXXX"  # record 9 loses its magic number
    (tmp_path / "data.rec").write_bytes(bytes(data))
    out = tmp_path / "out"
    with pytest.raises(RecordFormatError, match=r"bad magic.*record 9, byte offset"):
        extract_records(str(tmp_path / "data.rec"), str(out), shard_size=1500, workers=1)
    assert not (out / "data.lst").exists()
    markers = list((out / ".recpipe-extract").glob("chunk-*.json"))
    assert markers and len(markers) < len(json.loads(
        (out / ".recpipe-extract" / "plan.json").read_text())["chunks"])


def test_folder_extract_between_memory_urls():
    src = "memory://extract-src2/data.rec"
    records = write_labelled(src, count=6, multi=True)
    summary = extract_records(src, "memory://extract-out2/out", shard_size=3000, workers=2)
    fs = fsspec.filesystem("memory")
    lines = fs.cat(summary.list_file).decode().splitlines()
    assert summary.list_file.endswith("/out/data.lst") and len(lines) == 6
    for line, payload in zip(lines, records):
        assert fs.cat("memory://extract-out2/out/" + line.split("\t")[-1]) == unpack(payload)[1]


def test_repeated_keys_name_files_by_position(tmp_path):
    url = str(tmp_path / "dup.rec")
    images = [_jpeg(i) for i in range(4)]
    with RecordWriter(url) as writer:
        for key, image in zip((5, 6, 6, 7), images):
            writer.write(pack(IRHeader(0, 1.0, key, 0), image), key=key)
    extract_records(url, str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out" / "1").iterdir()) == [
        f"record-{i}.jpg" for i in range(4)]
    assert [(tmp_path / "out" / "1" / f"record-{i}.jpg").read_bytes() for i in range(4)] == images


class _Stop(Exception):
    pass


def _interrupted(src, out, after_images=7, **options):
    """An extract stopped after ``after_images`` images (chunks of ~3 images done before)."""
    seen = []

    def progress(nbytes):
        seen.append(nbytes)
        if len(seen) >= after_images:
            raise _Stop()

    with pytest.raises(_Stop):
        extract_records(src, out, shard_size=1500, workers=1, progress=progress, **options)
    assert list((Path(out) / ".recpipe-extract").glob("chunk-*"))


def _relabelled(url, sums=True):
    """Rewrite ``url`` with the same record sizes (and index) but other labels."""
    with RecordReader(url) as reader:
        payloads = list(reader)
    with RecordWriter(url, sums=sums) as writer:
        for key, payload in enumerate(payloads):
            header, image = unpack(payload)
            writer.write(pack(IRHeader(0, float((header.label + 1) % 3), header.id, 0), image),
                         key=key)


@pytest.mark.parametrize("sums", [True, False])
def test_resume_refuses_a_relabelled_file_of_the_same_size(tmp_path, sums):
    src = str(tmp_path / "data.rec")
    with RecordWriter(src, sums=sums) as writer:
        for i in range(12):
            writer.write(pack(IRHeader(0, float(i % 3), i, 0), _jpeg(i)), key=i)
    size, index = os.path.getsize(src), (tmp_path / "data.idx").read_bytes()
    _interrupted(src, str(tmp_path / "out"))
    _relabelled(src, sums=sums)
    assert os.path.getsize(src) == size and (tmp_path / "data.idx").read_bytes() == index
    with pytest.raises(ValueError, match="another file"):
        extract_records(src, str(tmp_path / "out"), shard_size=1500, workers=1)


def test_resume_accepts_a_copy_with_the_same_records(tmp_path):
    write_labelled(str(tmp_path / "data.rec"), count=12)
    _interrupted(str(tmp_path / "data.rec"), str(tmp_path / "out"))
    (tmp_path / "copy").mkdir()
    for name in ("data.rec", "data.idx", "data.sums"):  # a copy: another inode and time
        (tmp_path / "copy" / name).write_bytes((tmp_path / name).read_bytes())
    again = extract_records(str(tmp_path / "copy" / "data.rec"), str(tmp_path / "out"),
                            shard_size=1500, workers=1)
    assert again.resumed_chunks > 0 and again.images == 12


def test_resume_extracts_again_a_done_chunk_whose_file_is_gone(tmp_path):
    records = write_labelled(str(tmp_path / "data.rec"), count=12)
    out = tmp_path / "out"
    _interrupted(str(tmp_path / "data.rec"), str(out))
    victim = out / "0" / "0.jpg"  # record 0: in chunk 0, done before the stop
    victim.unlink()
    again = extract_records(str(tmp_path / "data.rec"), str(out), shard_size=1500, workers=1)
    assert victim.read_bytes() == unpack(records[0])[1]
    assert again.images == 12
    lines = (out / "data.lst").read_text().splitlines()
    assert all((out / line.split("\t")[-1]).exists() for line in lines)


AWKWARD_LABELS = [0.7071068, 1e-7, 1e30, -2.5e-5, 123456.7, 3.0, 1e-40, 0.1]


def test_extract_then_pack_keeps_every_label(tmp_path):
    """``%f`` would write 0.707107 and 0.000000: the .lst of extract is exact instead."""
    records = []
    with RecordWriter(str(tmp_path / "data.rec")) as writer:
        for i in range(len(AWKWARD_LABELS)):
            labels = np.roll(np.array(AWKWARD_LABELS, np.float32), i)[:3]
            records.append(pack(IRHeader(0, labels, i, 0), _jpeg(i)))
            writer.write(records[-1], key=i)
    extract_records(str(tmp_path / "data.rec"), str(tmp_path / "out"))
    assert "\t0.7071068\t1e-07\t" in (tmp_path / "out" / "data.lst").read_text()
    assert main(["pack", str(tmp_path / "out" / "data.lst"), str(tmp_path / "again"),
                 "--pass-through", "--pack-label", "--no-progress", "--workers", "1"]) == 0
    with RecordReader(str(tmp_path / "again.rec")) as reader:
        assert list(reader) == records


def test_list_lines_stay_im2rec_unless_exact_is_asked():
    from recpipe.io.sidecars.index import exact_label_text, format_list_line

    assert format_list_line(3, (0.7071068, 2.0), "a/b.jpg") == "3\t0.707107\t2.000000\ta/b.jpg\n"
    assert format_list_line(3, (0.7071068, 2.0), "a/b.jpg", exact=True) == \
        "3\t0.7071068\t2.000000\ta/b.jpg\n"
    values = np.random.default_rng(5).integers(0, 2 ** 32, 20000, dtype=np.uint64)
    values = values.astype(np.uint32).view(np.float32)
    for value in values[np.isfinite(values)]:
        assert np.float32(float(exact_label_text(value))) == value


def _packed(tmp_path, **options):
    """SRC/cat|dog|eel/*.jpg packed by ``pack_dataset`` into ``tmp_path/packed/o``."""
    from recpipe.packing.packer import pack_dataset

    from .test_packer import CLASSES, PER_CLASS
    from .test_packer import _jpeg as class_jpeg

    src = tmp_path / "src"
    for label, name in enumerate(CLASSES):
        (src / name).mkdir(parents=True)
        for i in range(PER_CLASS):
            (src / name / f"img{i}.jpg").write_bytes(class_jpeg(20, 24 + i, 10 * label + i))
    pack_dataset(str(src), str(tmp_path / "packed" / "o"), pass_through=True, workers=0,
                 **options)
    return src


def test_folders_take_the_class_names_of_the_label_map(tmp_path):
    src = _packed(tmp_path)
    out = tmp_path / "out"
    summary = extract_records(str(tmp_path / "packed" / "o.rec"), str(out))
    assert summary.label_map == str(tmp_path / "packed" / "o.labels.json")
    assert sorted(p.name for p in out.iterdir()) == ["cat", "dog", "eel", "o.lst"]
    for name in ("cat", "dog", "eel"):  # each image in the folder of its class
        theirs = sorted(p.read_bytes() for p in (src / name).iterdir())
        assert sorted(p.read_bytes() for p in (out / name).iterdir()) == theirs
    assert main(["pack", str(out / "o.lst"), str(tmp_path / "again"), "--pass-through",
                 "--no-progress", "--workers", "1", "--no-shuffle"]) == 0
    with RecordReader(str(tmp_path / "packed" / "o.rec")) as a, \
            RecordReader(str(tmp_path / "again.rec")) as b:
        assert list(a) == list(b)
    numeric = extract_records(str(tmp_path / "packed" / "o.rec"), str(tmp_path / "num"),
                              label_map=False)
    assert numeric.label_map is None
    assert sorted(p.name for p in (tmp_path / "num").iterdir()) == ["0", "1", "2", "o.lst"]


def test_shards_and_splits_find_their_label_map(tmp_path):
    _packed(tmp_path, shards=2, val_ratio=0.25)
    shard = tmp_path / "packed" / "o_val-00001-of-00002.rec"
    assert shard.exists()
    summary = extract_records(str(shard), str(tmp_path / "out"), format="tar")
    assert summary.label_map == str(tmp_path / "packed" / "o.labels.json")
    with tarfile.open(summary.shards[0]) as tar:
        metas = [json.loads(tar.extractfile(n).read()) for n in tar.getnames()
                 if n.endswith(".json")]
    assert metas and all(m["class"] == ("cat", "dog", "eel")[int(m["labels"][0])] for m in metas)
    assert not (tmp_path / "out" / ".recpipe-extract").exists()


@pytest.mark.parametrize("classes", [{"../up": 0, "dog": 1, "eel": 2},
                                     {".hidden": 0, "dog": 1, "eel": 2},
                                     {"a/b": 0, "dog": 1, "eel": 2},
                                     {"2": 0, "dog": 1, "eel": 2}])
def test_a_label_map_with_unusable_names_leaves_numbers(tmp_path, classes):
    _packed(tmp_path)
    path = tmp_path / "packed" / "o.labels.json"
    data = json.loads(path.read_text())
    data["classes"] = classes
    path.write_text(json.dumps(data))
    summary = extract_records(str(tmp_path / "packed" / "o.rec"), str(tmp_path / "out"))
    assert summary.label_map is None
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["0", "1", "2", "o.lst"]


def test_a_label_map_of_another_file_is_not_used(tmp_path):
    _packed(tmp_path)
    path = tmp_path / "packed" / "o.labels.json"
    data = json.loads(path.read_text())
    data["splits"]["all"]["shards"][0]["bytes"] += 1  # the .rec changed since the pack
    path.write_text(json.dumps(data))
    summary = extract_records(str(tmp_path / "packed" / "o.rec"), str(tmp_path / "out"))
    assert summary.label_map is None and (tmp_path / "out" / "0").is_dir()


def test_a_complete_extract_leaves_no_state_and_is_not_mixed_with_another(tmp_path):
    write_labelled(str(tmp_path / "data.rec"), count=6)
    out = tmp_path / "out"
    extract_records(str(tmp_path / "data.rec"), str(out), shard_size=1500)
    assert not (out / ".recpipe-extract").exists()
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]
    with pytest.raises(ValueError, match="already holds files"):
        extract_records(str(tmp_path / "data.rec"), str(out))
    again = extract_records(str(tmp_path / "data.rec"), str(out), overwrite=True)
    assert again.images == 6 and not (out / ".recpipe-extract").exists()
