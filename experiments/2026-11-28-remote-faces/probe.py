"""Where a remote faces epoch (block shuffle, 1 decode thread) loses against the local file.

Starts one store's server as benchmarks/suites/stores.py does, uploads the faces, then alternates
local and remote runs of the stores suite's pipeline (faces recipe, block shuffle) and prints per
timed epoch: wall, client CPU, the consumer's wait, time spent in the reader's windows() (the
remote run's per-run Python), announce time, and requests.

    python experiments/2026-11-28-remote-faces/probe.py --store s3 --faces 20000 --rounds 3
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import data  # noqa: E402
from benchmarks.suites import stores  # noqa: E402


class Timed:
    """Wraps ``owner.name`` to add its wall time (and calls) to a counter."""

    def __init__(self, owner, name):
        self.owner, self.name = owner, name
        self.original = getattr(owner, name)
        self.seconds = 0.0
        self.calls = 0
        original = self.original

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1
        setattr(owner, name, wrapper)

    def take(self):
        out = (self.seconds, self.calls)
        self.seconds, self.calls = 0.0, 0
        return out


def _delta(before, after):
    """Decode threads' figures over one epoch: decode wall, their CPU, their GIL-held CPU."""
    return {"decode": after["stage_seconds"]["decode"] - before["stage_seconds"]["decode"],
            "cpu": after["cpu_seconds"] - before["cpu_seconds"],
            "gil": after["gil_seconds"] - before["gil_seconds"]}


def run(url, options, epochs, seed, threads, profile=None):
    from recpipe.decode.loader import ImageLoader
    from recpipe.io.reader import RecordReader
    from recpipe.io.remote.prefetch import Prefetcher
    from recpipe.io.remote.source import WindowClaim

    shape, augment = stores.RECIPES["faces"]
    windows = Timed(RecordReader, "claim_windows")  # the consumer's share, per batch
    announce = Timed(Prefetcher, "announce")
    waits = Timed(WindowClaim, "windows")  # the decode thread's share, per run
    rows = []
    try:
        with ImageLoader(url, 128, shape, storage_options=options, shuffle="block",
                         threads=threads, seed=seed, last_batch="drop", **augment) as loader:
            for e in range(epochs):
                before = loader.reader.source_stats()
                s0 = loader.stats()
                windows.take(), announce.take(), waits.take()
                cpu0, t0 = time.process_time(), time.perf_counter()
                first = None
                n = 0
                if profile and e == epochs - 1:
                    profile.enable()
                for x, _ in loader:
                    if first is None:
                        first = time.perf_counter() - t0
                    n += len(x)
                if profile and e == epochs - 1:
                    profile.disable()
                wall = time.perf_counter() - t0
                after = loader.reader.source_stats()
                rows.append(dict(epoch=e, wall=wall, img_s=n / wall,
                                 cpu=time.process_time() - cpu0, first_batch=first,
                                 windows=windows.take(), announce=announce.take(),
                                 waits=waits.take(),
                                 requests=after.get("requests", 0) - before.get("requests", 0),
                                 stats=_delta(s0, loader.stats())))
    finally:
        RecordReader.claim_windows = windows.original
        Prefetcher.announce = announce.original
        WindowClaim.windows = waits.original
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--store", default="s3")
    p.add_argument("--faces", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--profile", action="store_true")
    a = p.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", stores.KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", stores.SECRET)
    work = Path(__file__).resolve().parents[2] / ".bench" / "data"
    local = data.faces_rec(work, a.faces)
    tmp = tempfile.mkdtemp(prefix="probe-")
    store = stores.STORES[a.store]().start(tmp, {"weed_args": "", "auth": False})
    try:
        url = store.upload(local, "faces")
        for r in range(a.rounds):
            for name, (u, o) in (("local", (local, None)), (a.store, (url, store.options))):
                prof = None
                if a.profile and r == a.rounds - 1:
                    import cProfile
                    prof = cProfile.Profile()
                rows = run(u, o, a.epochs, r + 1, a.threads, prof)
                for row in rows[1:]:
                    print(f"{name:6} r{r} e{row['epoch']} wall {row['wall']:.3f} "
                          f"img/s {row['img_s']:.0f} cpu {row['cpu']:.3f} "
                          f"first {row['first_batch'] * 1e3:.1f} ms "
                          f"claims {row['windows'][0] * 1e3:.1f} ms/{row['windows'][1]} "
                          f"(waits {row['waits'][0] * 1e3:.1f} ms/{row['waits'][1]}) "
                          f"announce {row['announce'][0] * 1e3:.1f} ms/{row['announce'][1]} "
                          f"req {row['requests']} | decode thread: wall "
                          f"{row['stats']['decode']:.3f} cpu {row['stats']['cpu']:.3f} "
                          f"gil {row['stats']['gil'] * 1e3:.1f} ms", flush=True)
                if prof is not None:
                    import pstats
                    print(f"--- profile of {name}'s last epoch (consumer thread)")
                    pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    finally:
        stores.stop(store.proc)


if __name__ == "__main__":
    main()
