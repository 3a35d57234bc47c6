"""Per-record Python calls before/after the record framing, image header and labels moved to C
(csrc/record/record.h through recpipe._kernels): RecordReader iteration, mx.recordio's
MXRecordIO.read + unpack and MXIndexedRecordIO.read_idx + unpack, and unpack_header +
header_labels alone, over the 1000 photos, two trees alternated in fresh processes.

    python3 experiments/2026-11-28-records-in-c/bench_records.py BASE_TREE NEW_TREE [ROUNDS]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PHOTOS = Path(os.environ.get("PHOTOS", "/work/shared/data/photos"))

CHILD = r"""
import json, sys, time
from recpipe.io import RecordReader, unpack_header
from recpipe.decode.labels import header_labels
from recpipe import recordio
rec, idx = sys.argv[1], sys.argv[2]

def best(fn, repeat=7):
    times = []
    for _ in range(repeat):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return min(times)

reader = RecordReader(rec, idx)
payloads = list(reader)
def iterate():
    for _ in reader:
        pass
def mx_sequential():
    r = recordio.MXRecordIO(rec, "r")
    while True:
        s = r.read()
        if s is None:
            break
        recordio.unpack(s)
    r.close()
indexed = recordio.MXIndexedRecordIO(idx, rec, "r")
keys = list(indexed.keys)
def mx_indexed():
    for k in keys:
        recordio.unpack(indexed.read_idx(k))
def headers():
    for p in payloads:
        h, _ = unpack_header(p)
        header_labels(h, 1)
print(json.dumps({"iterate": best(iterate), "mx_read_unpack": best(mx_sequential),
                  "mx_read_idx_unpack": best(mx_indexed), "unpack_header_labels": best(headers)}))
"""


def make_rec(folder):
    from recpipe.io import IRHeader, RecordWriter, pack
    rec, idx = os.path.join(folder, "photos.rec"), os.path.join(folder, "photos.idx")
    files = sorted(PHOTOS.rglob("*.jpg"))
    with RecordWriter(rec, idx) as writer:
        for i, path in enumerate(files):
            writer.write(pack(IRHeader(0, float(i % 10), i, 0), path.read_bytes()), key=i)
    return rec, idx, len(files)


def main():
    base, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    with tempfile.TemporaryDirectory() as folder:
        rec, idx, count = make_rec(folder)
        results = {base: [], new: []}
        for r in range(rounds):
            for tree in ((base, new) if r % 2 == 0 else (new, base)):
                env = dict(os.environ, PYTHONPATH=tree)
                out = subprocess.run([sys.executable, "-c", CHILD, rec, idx], env=env,
                                     check=True, capture_output=True, text=True, cwd=tree)
                results[tree].append(json.loads(out.stdout))
    print(f"{count} records, {rounds} rounds alternated, best of 7 per round, median of rounds")
    for name in results[base][0]:
        b = statistics.median(x[name] for x in results[base])
        n = statistics.median(x[name] for x in results[new])
        print(f"{name:22s} base {b / count * 1e6:7.2f} us/record  new {n / count * 1e6:7.2f} "
              f"us/record  new/base {n / b:.3f}")


if __name__ == "__main__":
    main()
