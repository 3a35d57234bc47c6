"""GIL-held time per image of ``ImageLoader``, measured from outside the library beside its own
counter, for one or more source trees (before/after), alternated.

Each point runs in a fresh child process (``PYTHONPATH`` = the tree) that builds a shuffled
loader as ``recpipe bench`` does (``recpipe.decode.bench.CONFIGS``), warms it up, then consumes
batches while three measures run:

- ``library``: the loader's own ``gil_seconds`` (worker CPU outside GIL-releasing C calls) per
  decoded sample: what ``recpipe bench`` prints as "GIL us".
- ``probe``: a pure-Python thread that asks for the GIL all the time (a short loop, then
  ``os.sched_yield()``, which hands the GIL over). Its wall time that is neither its own CPU nor
  run-queue delay (``/proc/self/task/TID/schedstat``, so CPU contention is not counted) is time it
  waited for the GIL, i.e. the GIL held by every other thread (workers, consumer, hand-offs),
  per delivered image.
- ``consumer``: the CPU time of the consuming thread per image (``time.thread_time``): the
  per-batch Python the library's counter does not see.
- ``py-spy`` (``--py-spy``, when installed): ``py-spy record --gil --nonblocking`` sampling the
  child during the window; the share of its samples not in the probe (which always wants the
  GIL, so a sample always finds a holder) x the window / images. py-spy names the GIL holder
  from CPython's ``last_holder``, which still names a thread inside a GIL-releasing C call, so
  this share over-counts (an upper bound).

    python experiments/2026-11-25-gil-probes/gil_probe.py /tmp/photos.rec --config train \\
        --threads 1,2 \\
        --trees before=/tmp/before,after=. --rounds 3 --seconds 4 --py-spy

Trees alternate ABBA (the order reverses every other round); ``ratio`` is the median over rounds
of each tree's images/s over the first tree's in the same round.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # experiments/<note>/ -> the repository
PROBE_FUNCTION = "_probe_loop"


def _schedstat(native_id):
    """(seconds on CPU, seconds runnable but waiting for a CPU) of one thread."""
    with open(f"/proc/self/task/{native_id}/schedstat") as f:
        on_cpu, waiting = f.read().split()[:2]
    return int(on_cpu) / 1e9, int(waiting) / 1e9


class Probe(threading.Thread):
    """A thread that wants the GIL all the time and lets it go every few microseconds."""

    def __init__(self):
        super().__init__(name="gil-probe", daemon=True)
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.loops = 0

    def run(self):
        self.native = threading.get_native_id()
        self.ready.set()
        _probe_loop(self)

    def sample(self):
        """(wall, cpu, run-queue wait, loops) now."""
        cpu, waiting = _schedstat(self.native)
        return time.perf_counter(), cpu, waiting, self.loops


def _probe_loop(probe):
    while not probe.stop.is_set():
        for _ in range(100):
            pass
        probe.loops += 1
        os.sched_yield()  # releases the GIL (a waiting thread takes it) without sleeping


# MXNet recipes beside recpipe bench's (issue 21 item 2): example/image-classification's
# --aug-level 3 without its HLS shift, and the CIFAR scripts' pad=4 random crop (224 px here)
RECIPES = {
    "aug3": dict(data_shape=(3, 224, 224), rand_crop=True, rand_mirror=True,
                 max_aspect_ratio=0.25, max_rotate_angle=10, max_shear_ratio=0.1,
                 fill_value=127),
    "cifar_pad4": dict(data_shape=(3, 224, 224), pad=4, rand_crop=True, rand_mirror=True),
}


def child(args):
    """One measurement in this process; prints a JSON line."""
    from recpipe.decode.bench import CONFIGS
    from recpipe.decode.loader import ImageLoader

    settings = dict(CONFIGS[args.config] if args.config in CONFIGS else RECIPES[args.config])
    settings.update(json.loads(args.extra) if args.extra else {})
    shape = tuple(settings.pop("data_shape"))
    dtype = args.dtype or ("float32" if args.config == "faces" else "uint8")
    with ImageLoader(args.rec, 128, shape, threads=args.child_threads, dtype=dtype, shuffle=True,
                     **settings) as loader:
        result = measure(loader, args.seconds, probe=args.probe,
                         before_window=lambda: _ready(args.wait_go))
    print(json.dumps(result), flush=True)


def _ready(wait_go):
    print("READY", flush=True)
    if wait_go:
        sys.stdin.readline()


def measure(loader, seconds, *, probe=True, before_window=None):
    """The measures of one loader over ``seconds`` after 3 warm-up batches (see the module
    docstring): images/s, the library's GIL us per image, the consumer's CPU us per image and,
    with ``probe``, the probe thread's GIL wait per image. ``before_window()`` runs once the
    probe is up, just before the window opens."""
    stream = _endless(loader)
    for _ in range(3):
        next(stream)
    thread = Probe() if probe else None
    if thread is not None:
        thread.start()
        thread.ready.wait()
    if before_window is not None:
        before_window()
    before, p0 = loader.stats(), thread and thread.sample()
    c0 = time.thread_time()
    images = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        images += len(next(stream)[0])
    consumer_cpu = time.thread_time() - c0
    wall = seconds + (time.perf_counter() - deadline)
    after = loader.stats()
    result = {"images": images, "seconds": wall, "images_per_s": images / wall,
              "consumer_cpu_us": consumer_cpu / images * 1e6}
    if thread is not None:
        p1 = thread.sample()
        thread.stop.set()
        thread.join()
        wall = p1[0] - p0[0]
        waited = max(0.0, wall - (p1[1] - p0[1]) - (p1[2] - p0[2]))
        result.update(probe_gil_us=waited / images * 1e6, probe_gil_share=waited / wall)
    samples = max(1, after["samples"] - before["samples"])
    result["library_gil_us"] = (after["gil_seconds"] - before["gil_seconds"]) / samples * 1e6
    return result


def _endless(loader):
    while True:
        yield from loader


def _py_spy_gil_share(path):
    """Share of a ``py-spy record --gil -f raw`` file's samples not taken in the probe: the probe
    always wants the GIL, so every sample finds a holder and the share is the others' GIL share
    whatever rate py-spy kept up with."""
    others = total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            total += int(count)
            if PROBE_FUNCTION not in stack:
                others += int(count)
    return others / total if total else None


def point(tree, args, threads):
    """Run one child for ``tree``; returns its measurements (and py-spy's)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    py_spy = shutil.which("py-spy") if args.py_spy else None
    command = [sys.executable, os.path.abspath(__file__), args.rec, "--config", args.config,
               *(["--dtype", args.dtype] if args.dtype else []),
               *(["--extra", args.extra] if args.extra else []),
               "--seconds", str(args.seconds), "--child-threads", str(threads)]
    if not args.probe:
        command.append("--no-probe")
    if py_spy:
        command.append("--wait-go")
    proc = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=tree)
    try:
        if proc.stdout.readline().strip() != "READY":
            raise SystemExit(f"child for {tree} did not start")
        spied = None
        if py_spy:
            with tempfile.TemporaryDirectory() as folder:
                raw = os.path.join(folder, "gil.txt")
                spy = subprocess.Popen([py_spy, "record", "--pid", str(proc.pid), "--gil",
                                        "--nonblocking", "--rate", str(args.rate), "--duration",
                                        str(max(1, int(args.seconds) - 1)), "-f", "raw",
                                        "-o", raw], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
                time.sleep(0.5)  # py-spy attaches
                proc.stdin.write("GO\n")
                proc.stdin.flush()
                spy.wait(timeout=args.seconds + 60)
                if os.path.exists(raw):
                    spied = _py_spy_gil_share(raw)
        result = json.loads(proc.stdout.readline())
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if spied is not None:  # GIL share from py-spy, per image at the child's own rate
        result["py_spy_gil_share"] = spied
        result["py_spy_gil_us"] = spied / result["images_per_s"] * 1e6
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--config", default="train",
                        choices=("train", "val", "faces") + tuple(RECIPES))
    parser.add_argument("--dtype", default=None, choices=("uint8", "float32", "float16"),
                        help="output dtype (default: float32 for faces, uint8 otherwise)")
    parser.add_argument("--extra", default=None,
                        help='JSON of loader keywords over the config, e.g. \'{"pca_noise": 0.1}\'')
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--trees", default=f"this={REPO}",
                        help="comma list of NAME=PATH source trees (alternated)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--py-spy", action="store_true")
    parser.add_argument("--no-probe", dest="probe", action="store_false",
                        help="no probe thread (throughput and the library's counter alone)")
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child-threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--wait-go", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_threads:
        return child(args)
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    results = {}
    for round_index in range(args.rounds):
        for threads in (int(t) for t in args.threads.split(",")):
            order = list(trees.items())
            if round_index % 2:  # ABBA: neither tree always runs first
                order.reverse()
            for name, tree in order:
                results.setdefault((name, threads), []).append(point(tree, args, threads))
    keys = ("images_per_s", "library_gil_us", "probe_gil_us", "consumer_cpu_us", "py_spy_gil_us")
    table = []
    for (name, threads), runs in results.items():
        row = {"tree": name, "threads": threads, "config": args.config, "rounds": len(runs)}
        for key in keys:
            values = [r[key] for r in runs if key in r]
            if values:
                row[key] = statistics.median(values)
        first = results[(next(iter(trees)), threads)]  # paired by round: same load, minutes apart
        row["ratio"] = statistics.median(r["images_per_s"] / f["images_per_s"]
                                         for r, f in zip(runs, first))
        table.append(row)
    if args.json:
        print(json.dumps({"rows": table, "runs": {f"{n}/{t}": r for (n, t), r in results.items()}}))
        return
    print(f"{args.rec} {args.config}: medians of {args.rounds} alternated rounds, "
          f"{args.seconds} s each")
    print("tree      threads  images/s  ratio  library us  probe us  consumer cpu us  py-spy us")
    for row in table:
        print(f"{row['tree']:9} {row['threads']:7} {row['images_per_s']:9.0f} {row['ratio']:6.3f} "
              f"{row['library_gil_us']:11.1f} {row.get('probe_gil_us', float('nan')):9.1f} "
              f"{row['consumer_cpu_us']:16.1f} {row.get('py_spy_gil_us', float('nan')):10.1f}")


if __name__ == "__main__":
    main()
