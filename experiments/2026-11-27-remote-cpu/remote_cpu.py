"""Where a remote run's client CPU goes: thread CPU per epoch of each stage, s3 against local.

Serves the faces (or photos) recipe's ``.rec`` from SeaweedFS on loopback (as
the stores suite, ``benchmarks/suites/stores.py``) and runs one loader over the local file and
one over ``s3://``,
alternated, timing epochs 2..N. Each stage's thread CPU (``time.thread_time`` around the call,
summed over threads) is added up per epoch: ``fetch`` (a range request's body read, in the fetch
threads), ``windows`` (a run's prefetched bytes taken from the plan), ``fill`` (a whole native
run, ``windows`` included), ``plan`` (an epoch's prefetch plan).

    python experiments/2026-11-27-remote-cpu/remote_cpu.py --recipe faces --count 20000 \\
        --threads 2 --rounds 2
"""

import argparse
import collections
import os
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # experiments/<note>/ -> the repository: recpipe and benchmarks

from benchmarks import data  # noqa: E402
from benchmarks.suites import stores as bench_s3  # noqa: E402  (the stores suite's servers)
from recpipe.decode.loader import ImageLoader  # noqa: E402
from recpipe.decode.records import RecordDecoder  # noqa: E402
from recpipe.io.remote.ranges.s3 import S3HttpRanges  # noqa: E402
from recpipe.io.reader import RecordReader  # noqa: E402

STAGES = ((S3HttpRanges, "fetch", "fetch"), (RecordReader, "windows", "windows"),
          (RecordDecoder, "_fill_native", "fill"), (RecordReader, "prefetch", "plan"))


class StageClock:
    """Thread CPU of the wrapped methods, summed over threads."""

    def __init__(self):
        self.seconds = collections.Counter()
        self._lock = threading.Lock()
        for owner, name, stage in STAGES:
            setattr(owner, name, self._timed(getattr(owner, name), stage))

    def _timed(self, method, stage):
        def timed(*args, **kwargs):
            t0 = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                spent = time.thread_time() - t0
                with self._lock:
                    self.seconds[stage] += spent
        return timed


def epochs(url, options, recipe, shuffle, threads, count, clock):
    """images/s, process CPU-s per epoch and each stage's CPU-s per epoch over epochs 2..count."""
    shape, augment = bench_s3.RECIPES[recipe]
    kwargs = dict(augment, shuffle=shuffle, threads=threads, seed=0, last_batch="drop")
    with ImageLoader(url, 128, shape, storage_options=options, **kwargs) as loader:
        images = 0
        for epoch in range(count):
            if epoch == 1:
                clock.seconds.clear()
                cpu0, t0 = time.process_time(), time.perf_counter()
            delivered = sum(len(x) for x, _ in loader)
            images += delivered if epoch else 0
        n = count - 1
        return (images / (time.perf_counter() - t0), (time.process_time() - cpu0) / n,
                {stage: seconds / n for stage, seconds in clock.seconds.items()})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", choices=("faces", "photos"), default="faces")
    parser.add_argument("--count", type=int, default=20000, help="faces made from --photos")
    parser.add_argument("--photos", default="/work/shared/data/photos")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=4, help="per run; the first is warm-up")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", bench_s3.KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", bench_s3.SECRET)
    clock = StageClock()
    with tempfile.TemporaryDirectory() as tmp:
        if args.recipe == "faces":
            local = data.faces_rec(os.path.join(tmp, "faces"), args.count, args.photos)
            shuffle = "block"
        else:
            local, shuffle = data.photos_rec(tmp, folder=args.photos), True
        os.makedirs(os.path.join(tmp, "weed"))
        proc, endpoint = bench_s3.start_weed(os.path.join(tmp, "weed"))
        try:
            options = bench_s3.upload(endpoint, local, "bench", args.recipe)
            for _ in range(args.rounds):
                for kind, url, opts in (("local", local, None),
                                        ("s3", f"s3://bench/{args.recipe}.rec", options)):
                    rate, cpu, stages = epochs(url, opts, args.recipe, shuffle, args.threads,
                                               args.epochs, clock)
                    split = "  ".join(f"{k} {v:.3f}" for k, v in sorted(stages.items()))
                    print(f"{kind:5s} {rate:8.0f} img/s  process CPU-s/epoch {cpu:.3f}  "
                          f"stages CPU-s/epoch: {split}", flush=True)
        finally:
            bench_s3.stop(proc)


if __name__ == "__main__":
    main()
