"""Shared plumbing of the peer runners: arguments, the timed loop, peak RSS, the JSON line.

Stdlib only: each runner runs under its own interpreter (.venv-mxnet has numpy 1.23 and no recpipe).
A runner builds its pipeline and hands ``measure`` two callables: ``fetch()`` (the next batch,
blocking) and ``consume(batch)`` (materialise it: ``(n_images, checksum)``); ``measure`` does the
untimed warm-up into steady state, times ``--batches`` batches and prints one JSON line on stdout.
"""

import argparse
import json
import os
import resource
import sys
import time

__all__ = [
    "TRAIN", "VAL", "IMAGENET_MEAN", "IMAGENET_STD",
    "parse_args", "measure", "peak_rss_mb", "current_rss_mb", "emit", "touch",
]

# The two configs every contender must reproduce exactly.
TRAIN = {
    "name": "train", "size": 224, "area": (0.08, 1.0), "aspect": (3 / 4, 4 / 3),
    "mirror": True, "dtype": "uint8", "layout": "NCHW",
}
VAL = {"name": "val", "size": 224, "resize": 256, "mirror": False, "dtype": "uint8",
       "layout": "NCHW"}
IMAGENET_MEAN = (123.68, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)


def parse_args(description, extra=None):
    """Parse the runner arguments common to every contender; ``extra(parser)`` adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", choices=("train", "val"), default="train")
    parser.add_argument("--threads", default="1",
                        help="decode threads/workers; 'default' = the contender's own default")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--batches", type=int, default=20, help="timed batches")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches first (at least)")
    parser.add_argument("--steady-wait", type=float, default=0.005,
                        help="warm-up ends on a fetch that waited this long (s): the queue is "
                             "empty")
    parser.add_argument("--max-extra-warmup", type=int, default=40,
                        help="give up waiting for steady state after this many more batches")
    parser.add_argument("--rec", help="path of the .rec (its .idx beside it)")
    parser.add_argument("--folder", help="class-folder tree of JPEGs (ImageFolder contenders)")
    parser.add_argument("--dtype", choices=("uint8", "float32"), default="uint8")
    parser.add_argument("--seed", type=int, default=0)
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    args.config_spec = dict(TRAIN if args.config == "train" else VAL, dtype=args.dtype)
    return args


def thread_count(args):
    """``--threads`` as an int, or None for 'default'."""
    return None if args.threads == "default" else int(args.threads)


def peak_rss_mb(who=resource.RUSAGE_SELF):
    """Peak resident set size in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(who).ru_maxrss / 1024.0


def current_rss_mb():
    """Current resident set size in MiB, from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _children_cpu_seconds_live():
    """CPU seconds of live child processes (DataLoader workers are reaped only at exit)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in _child_pids():
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _child_pids():
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as children:
            return [int(pid) for pid in children.read().split()]
    except OSError:
        return []


def children_rss_mb():
    """Summed current RSS of live child processes (DataLoader workers), in MiB."""
    total = 0.0
    for pid in _child_pids():
        try:
            with open(f"/proc/{pid}/statm") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except OSError:
            continue
    return total


def touch(array_like):
    """Checksum one byte per image so the batch is really materialised (numpy-like input)."""
    flat = array_like.reshape(array_like.shape[0], -1)
    return int(flat[:, flat.shape[1] // 2].astype("int64").sum())


def _warm_up(args, fetch, consume):
    """Untimed batches until ``--warmup`` are done AND a fetch had to wait for its batch.

    Every pipeline builds batches ahead (prefetch queues, DataLoader workers, MXNet's 16-batch
    buffer) while it starts up; timing from a full queue would count those batches for free. A
    fetch that blocks proves the queue is empty, so the timed loop starts in steady state.
    Returns ``(batches, steady)``.
    """
    batches = 0
    while True:
        start = time.perf_counter()
        batch = fetch()
        waited = time.perf_counter() - start
        consume(batch)
        batches += 1
        if batches >= args.warmup and waited >= args.steady_wait:
            return batches, True
        if batches >= args.warmup + args.max_extra_warmup:
            return batches, False


def measure(args, fetch, consume, *, contender, used, threads_used):
    """Warm up, time ``args.batches`` batches, print the JSON line and return it as a dict.

    ``fetch()`` returns the next batch (blocking), ``consume(batch)`` materialises it and returns
    ``(n_images, checksum)``.
    """
    warmup_batches, steady = _warm_up(args, fetch, consume)
    cpu_start = _cpu_seconds() + _children_cpu_seconds_live()
    start = time.perf_counter()
    images = checksum = 0
    for _ in range(args.batches):
        n_images, batch_sum = consume(fetch())
        images += n_images
        checksum += batch_sum
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds() + _children_cpu_seconds_live() - cpu_start
    result = {
        "contender": contender,
        "config": args.config,
        "dtype": args.dtype,
        "threads": threads_used,
        "threads_arg": args.threads,
        "batch": args.batch,
        "batches": args.batches,
        "warmup": warmup_batches,
        "steady": steady,
        "images": images,
        "seconds": round(seconds, 4),
        "images_per_s": round(images / seconds, 2),
        "cpu_per_wall": round(cpu / seconds, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "children_rss_mb": round(children_rss_mb(), 1),
        "checksum": checksum,
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "used": used,
    }
    emit(result)
    return result


def emit(result):
    """Print ``result`` as the one JSON line the orchestrator reads."""
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()
