"""Helper run by the *mxnet venv's* python for the cross-checks: ``mx_helpers.py COMMAND SPEC OUT``.

SPEC and OUT are JSON files; bytes travel base64-encoded. This script imports mxnet (1.9.1) and
never recpipe. Commands:

- ``write-indexed``: ``{"rec", "idx", "records": [[key, b64], ...]}`` -> MXIndexedRecordIO.write_idx
- ``pack``: ``{"items": [{"header": [flag, label, id, id2], "data": b64, "ours": b64}]}`` ->
  ``{"packed": [b64], "unpacked": [header dict of mx.recordio.unpack(ours)]}``
- ``read-indexed``: ``{"files": [[rec, idx], ...], "headers": bool}`` -> per file ``{"keys",
  "records": [dict]}`` via ``read_idx`` on every key (headers unpacked unless false), plus
  ``"sequential"``: payload count of plain ``read()``
- ``iter``: ``{"runs": [ImageRecordIter kwargs]}`` -> per run ``{"labels", "means"}`` per image
  (batch_size 1, mean of each RGB channel)
- ``im2rec``: ``{"script": path or null, "runs": [argv]}`` -> runs ``tools/im2rec.py`` in-process
  once per argv; per run ``{"stdout", "error"}``
- ``imresize``: ``{"items": [{"image": b64, "shape": [h, w, c], "size": [w, h], "interp": n}]}``
  -> ``{"resized": [b64]}``: ``mx.image.imresize`` (MXNet's own OpenCV) of each uint8 image
- ``decode-indexed``: ``{"rec", "idx"}`` -> ``{"images": [{"key", "shape", "sha256"}]}``: every
  record's image decoded by ``mx.image.imdecode`` (MXNet's own OpenCV and libjpeg)
"""

import base64
import contextlib
import io
import json
import os
import runpy
import sys
import traceback
import warnings

warnings.simplefilter("ignore")

import mxnet as mx  # noqa: E402


def b64(data):
    return base64.b64encode(bytes(data)).decode("ascii")


def unb64(text):
    return base64.b64decode(text)


def header_dict(header, image):
    label = header.label
    label = label.tolist() if hasattr(label, "tolist") else float(label)
    return {"flag": int(header.flag), "label": label, "id": int(header.id), "id2": int(header.id2),
            "image": b64(image)}


def write_indexed(spec):
    record = mx.recordio.MXIndexedRecordIO(spec["idx"], spec["rec"], "w")
    for key, payload in spec["records"]:
        record.write_idx(key, unb64(payload))
    record.close()
    return {}


def pack(spec):
    packed, unpacked = [], []
    for item in spec["items"]:
        flag, label, id_, id2 = item["header"]
        header = mx.recordio.IRHeader(flag, label, id_, id2)
        packed.append(b64(mx.recordio.pack(header, unb64(item["data"]))))
        unpacked.append(header_dict(*mx.recordio.unpack(unb64(item["ours"]))))
    return {"packed": packed, "unpacked": unpacked}


def read_one(rec, idx, headers):
    record = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    records = []
    for key in record.keys:
        payload = record.read_idx(key)
        entry = header_dict(*mx.recordio.unpack(payload)) if headers else {}
        entry["payload"] = b64(payload)
        records.append(entry)
    keys = list(record.keys)
    record.close()
    sequential = mx.recordio.MXRecordIO(rec, "r")
    count = 0
    while sequential.read() is not None:
        count += 1
    sequential.close()
    return {"keys": keys, "records": records, "sequential": count}


def read_indexed(spec):
    headers = spec.get("headers", True)
    return {"files": [read_one(rec, idx, headers) for rec, idx in spec["files"]]}


def iterate(kwargs):
    kwargs = dict(kwargs, batch_size=1, shuffle=False, preprocess_threads=1)
    kwargs["data_shape"] = tuple(kwargs["data_shape"])
    it = mx.io.ImageRecordIter(**kwargs)
    labels, means = [], []
    for batch in it:
        data = batch.data[0].asnumpy()
        label = batch.label[0].asnumpy()
        for i in range(data.shape[0] - batch.pad):
            labels.append(label[i].tolist())
            means.append(data[i].reshape(data.shape[1], -1).mean(axis=1).tolist())
    del it
    return {"labels": labels, "means": means}


def iter_runs(spec):
    return {"runs": [iterate(kwargs) for kwargs in spec["runs"]]}


def im2rec_script():
    return os.path.join(os.path.dirname(mx.__file__), "tools", "im2rec.py")


def run_im2rec(script, argv):
    out = io.StringIO()
    saved = sys.argv
    sys.argv = [script] + list(argv)
    error = None
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code:
            error = f"SystemExit({e.code})"
    except Exception:  # noqa: BLE001 - im2rec's own crash, reported to the test
        error = traceback.format_exc()
    finally:
        sys.argv = saved
    return {"stdout": out.getvalue(), "error": error}


def im2rec(spec):
    script = spec.get("script") or im2rec_script()
    return {"runs": [run_im2rec(script, argv) for argv in spec["runs"]]}


def imresize(spec):
    import numpy as np

    resized = []
    for item in spec["items"]:
        image = np.frombuffer(unb64(item["image"]), np.uint8).reshape(item["shape"])
        width, height = item["size"]
        out = mx.image.imresize(mx.nd.array(image, dtype=np.uint8), width, height,
                                interp=item["interp"])
        resized.append(b64(out.asnumpy().astype(np.uint8).tobytes()))
    return {"resized": resized}


def decode_indexed(spec):
    import hashlib

    record = mx.recordio.MXIndexedRecordIO(spec["idx"], spec["rec"], "r")
    images = []
    for key in record.keys:
        _, image = mx.recordio.unpack(record.read_idx(key))
        pixels = mx.image.imdecode(image).asnumpy()
        images.append({"key": int(key), "shape": list(pixels.shape),
                       "sha256": hashlib.sha256(pixels.tobytes()).hexdigest()})
    record.close()
    return {"images": images}


COMMANDS = {
    "decode-indexed": decode_indexed,
    "write-indexed": write_indexed,
    "pack": pack,
    "read-indexed": read_indexed,
    "iter": iter_runs,
    "im2rec": im2rec,
    "imresize": imresize,
}


def main(argv):
    command, spec_path, out_path = argv
    with open(spec_path) as f:
        spec = json.load(f)
    result = COMMANDS[command](spec)
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
