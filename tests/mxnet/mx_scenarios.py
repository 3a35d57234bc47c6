"""One test body, two implementations: ``python mx_scenarios.py IMPL COMMAND WORKDIR OUT``.

IMPL is ``mxnet`` (the real mxnet 1.9.1, run by the mxnet venv's python) or ``recpipe`` (``import
recpipe as mx``, run by the test's python). Every scenario uses only ``mx.recordio`` and
``mx.image`` calls as programs written for MXNet do, and returns plain JSON; the test runs the
same command under both implementations and requires equal results.

Commands: ``recordio`` (MXRecordIO / MXIndexedRecordIO behaviour, modelled on MXNet's
test_recordio.py and the docstring examples), ``imdecode`` (decode the images in WORKDIR/images),
``write-faces`` (an InsightFace-layout face dataset in WORKDIR/faces, written with pack_img),
``read-faces`` (arcface_torch's MXFaceDataset logic over that dataset).
"""

import hashlib
import json
import numbers
import os
import pickle
import sys
import traceback
import warnings

warnings.simplefilter("ignore")

import numpy as np  # noqa: E402

if sys.argv[1] == "mxnet":
    import mxnet as mx  # noqa: E402
else:
    import recpipe as mx  # noqa: E402


def digest(data):
    return None if data is None else hashlib.sha256(bytes(data)).hexdigest()[:16]


def outcome(fn):
    """``fn()``'s value, or the name of the exception it raised."""
    try:
        return {"value": fn()}
    except Exception as exc:  # noqa: BLE001 - the exception type is the result
        return {"raised": type(exc).__name__}


def header_json(header):
    label = header.label
    label = [float(x) for x in label] if not isinstance(label, numbers.Number) else float(label)
    return [int(header.flag), label, int(header.id), int(header.id2)]


# -- recordio -------------------------------------------------------------------------------

def sequential(work):
    path = os.path.join(work, "seq.rec")
    writer = mx.recordio.MXRecordIO(path, "w")
    for i in range(5):
        writer.write(b"record_%d" % i * (i + 1))
    writer.write(b"")
    writer.close()
    reader = mx.recordio.MXRecordIO(path, "r")
    records = [reader.read() for _ in range(6)]
    after_end = [digest(reader.read()), digest(reader.read())]
    reader.reset()
    again = reader.read()
    reader.close()
    reader.close()  # closing twice is allowed
    return {"records": [digest(r) for r in records], "sizes": [len(r) for r in records],
            "after_end": after_end, "after_reset": digest(again), "size": os.path.getsize(path)}


def indexed(work, key_type=int):
    rec, idx = os.path.join(work, "ix.rec"), os.path.join(work, "ix.idx")
    keys = [5, 3, 10, 7] if key_type is int else ["b", "a", "zz", "c d"]
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w", key_type=key_type)
    tells = [writer.tell()]
    for i, key in enumerate(keys):
        writer.write_idx(key, b"payload-%d" % i * (2 * i + 1))
        tells.append(writer.tell())
    written = {"keys": [str(k) for k in writer.keys], "idx": {str(k): v for k,
                                                              v in writer.idx.items()}}
    writer.close()
    reader = mx.recordio.MXIndexedRecordIO(idx, rec, "r", key_type=key_type)
    by_key = {str(k): digest(reader.read_idx(k)) for k in reversed(keys)}
    reader.seek(keys[1])
    following = [digest(reader.read()) for _ in range(4)]
    missing = outcome(lambda: reader.read_idx("nope" if key_type is int else "missing"))
    result = {"tells": tells, "written": written, "keys": [str(k) for k in reader.keys],
              "key_types": sorted({type(k).__name__ for k in reader.keys}),
              "idx": {str(k): v for k, v in reader.idx.items()}, "by_key": by_key,
              "following": following, "missing": missing,
              "idx_text": open(idx).read()}
    reader.close()
    return result


def misuse(work):
    path = os.path.join(work, "misuse.rec")
    writer = mx.recordio.MXRecordIO(path, "w")
    results = {"read_on_writer": outcome(writer.read),
               "bad_flag": outcome(lambda: mx.recordio.MXRecordIO(path, "a"))}
    writer.write(b"x")
    writer.close()
    reader = mx.recordio.MXRecordIO(path, "r")
    results["write_on_reader"] = outcome(lambda: reader.write(b"y"))
    reader.close()
    return results


def pickled(work):
    rec, idx = os.path.join(work, "pk.rec"), os.path.join(work, "pk.idx")
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i in range(4):
        writer.write_idx(i, b"rec%d" % i)
    writer.close()
    reader = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    first = reader.read()
    copy = pickle.loads(pickle.dumps(reader))
    return {"first": digest(first), "copy_open": copy.is_open, "copy_keys": copy.keys,
            "copy_next": digest(copy.read()), "copy_idx2": digest(copy.read_idx(2)),
            "original_open_after_pickle": reader.is_open,
            "original_read_after_pickle": outcome(lambda: digest(reader.read_idx(3)))}


def dropped(work):
    rec, idx = os.path.join(work, "drop.rec"), os.path.join(work, "drop.idx")
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i in range(3):
        writer.write_idx(i, b"kept%d" % i)
    del writer  # no close(): MXNet's __del__ closes and flushes
    reader = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    return {"keys": reader.keys, "records": [digest(reader.read_idx(i)) for i in range(3)]}


def forked(work):
    import multiprocessing

    rec, idx = os.path.join(work, "fork.rec"), os.path.join(work, "fork.idx")
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i in range(6):
        writer.write_idx(i, b"forked%d" % i)
    writer.close()
    reader = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    reader.read_idx(1)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        in_children = pool.map(_read_in_child, [(reader, k) for k in range(6)])
    other = mx.recordio.MXRecordIO(os.path.join(work, "fork_w.rec"), "w")
    with ctx.Pool(1) as pool:
        write_in_child = pool.apply(_write_in_child, (other,))
    other.close()
    return {"in_children": in_children, "write_in_child": write_in_child}


def _read_in_child(args):
    reader, key = args
    return digest(reader.read_idx(key))


def _write_in_child(writer):
    return outcome(lambda: writer.write(b"z"))


def labels(work):
    headers = [mx.recordio.IRHeader(0, 3.0, 7, 0), mx.recordio.IRHeader(0, [1.0, 2.5], 8, 1),
               mx.recordio.IRHeader(5, np.arange(3, dtype=np.float32), 9, 2),
               mx.recordio.IRHeader(2, [11.0, 15.0], 0, 0)]
    packed = [mx.recordio.pack(h, b"" if i == 3 else b"image%d" % i) for i, h in enumerate(headers)]
    unpacked = [mx.recordio.unpack(p) for p in packed]
    return {"packed": [digest(p) for p in packed],
            "unpacked": [header_json(h) + [digest(s)] for h, s in unpacked]}


def recordio(work):
    return {"sequential": sequential(work), "indexed": indexed(work),
            "indexed_str": indexed(work, str), "misuse": misuse(work), "pickled": pickled(work),
            "dropped": dropped(work), "forked": forked(work), "labels": labels(work)}


# -- images ---------------------------------------------------------------------------------

def imdecode(work):
    folder = os.path.join(work, "images")
    results = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        for flag, to_rgb in ((1, 1), (1, 0), (0, 1)):
            image = mx.image.imdecode(data, flag=flag, to_rgb=to_rgb).asnumpy()
            results[f"{name} flag={flag} to_rgb={to_rgb}"] = [list(image.shape), str(image.dtype),
                                                               digest(image.tobytes())]
        results[f"{name} imread"] = digest(mx.image.imread(os.path.join(folder, name)).asnumpy())
    results["str input"] = outcome(lambda: mx.image.imdecode("not bytes"))
    return results


# -- InsightFace layout ---------------------------------------------------------------------

def write_faces(work):
    """``num_ids`` identities of 1-4 images each, as InsightFace's packing tools lay them out:
    key 0 = header record (flag 2, label = [first identity key, end of identity keys]),
    keys 1..N = images (label = identity), then one record per identity (label = its image
    range)."""
    import cv2  # noqa: F401 - pack_img needs it in both implementations

    folder = os.path.join(work, "faces")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    per_id = [int(n) for n in rng.integers(1, 5, 7)]
    num_images = sum(per_id)
    writer = mx.recordio.MXIndexedRecordIO(os.path.join(folder, "train.idx"),
                                           os.path.join(folder, "train.rec"), "w")
    first_id_key = num_images + 1
    writer.write_idx(0, mx.recordio.pack(
        mx.recordio.IRHeader(2, [first_id_key, first_id_key + len(per_id)], 0, 0), b""))
    key = 1
    ranges = []
    for identity, count in enumerate(per_id):
        start = key
        for _ in range(count):
            y, x = np.mgrid[0:112, 0:112]
            img = (rng.uniform(30, 200, 3) + y[..., None] * rng.uniform(-0.8, 0.8, 3)
                   + x[..., None] * rng.uniform(-0.8, 0.8, 3)).clip(0, 255).astype(np.uint8)
            header = mx.recordio.IRHeader(0, float(identity), key, 0)
            writer.write_idx(key, mx.recordio.pack_img(header, img, quality=95))
            key += 1
        ranges.append((start, key))
    for identity, (start, end) in enumerate(ranges):
        writer.write_idx(first_id_key + identity,
                         mx.recordio.pack(mx.recordio.IRHeader(2, [start, end], 0, 0), b""))
    writer.close()
    return {"images": num_images, "identities": len(per_id)}


class MXFaceDataset:
    """arcface_torch's dataset logic (recognition/arcface_torch/dataset.py), without torch."""

    def __init__(self, root_dir):
        path_imgrec = os.path.join(root_dir, "train.rec")
        path_imgidx = os.path.join(root_dir, "train.idx")
        self.imgrec = mx.recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
        s = self.imgrec.read_idx(0)
        header, _ = mx.recordio.unpack(s)
        if header.flag > 0:
            self.header0 = (int(header.label[0]), int(header.label[1]))
            self.imgidx = np.array(range(1, int(header.label[0])))
        else:
            self.imgidx = np.array(list(self.imgrec.keys))

    def __getitem__(self, index):
        idx = self.imgidx[index]
        s = self.imgrec.read_idx(idx)
        header, img = mx.recordio.unpack(s)
        label = header.label
        if not isinstance(label, numbers.Number):
            label = label[0]
        sample = mx.image.imdecode(img).asnumpy()
        return sample, int(label)

    def __len__(self):
        return len(self.imgidx)


def read_faces(work):
    dataset = MXFaceDataset(os.path.join(work, "faces"))
    samples = [dataset[i] for i in range(len(dataset))]
    return {"header0": list(dataset.header0), "length": len(dataset),
            "labels": [label for _, label in samples],
            "pixels": [digest(sample.tobytes()) for sample, _ in samples],
            "shapes": sorted({str(sample.shape) for sample, _ in samples})}


COMMANDS = {"recordio": recordio, "imdecode": imdecode, "write-faces": write_faces,
            "read-faces": read_faces}


def main():
    _, _, command, work, out = sys.argv
    try:
        result = COMMANDS[command](work)
    except Exception:  # noqa: BLE001 - reported to the test
        sys.stderr.write(traceback.format_exc())
        sys.exit(1)
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
