"""GIL-held time per image of the recipes issue 21 item 2 moved to the native path for
resizes and labels, measured from outside the library (``gil_probe.py``'s probe thread:
the time a pure-Python thread that always wants the GIL waited for it, per delivered image)
beside the library's own counter, for source trees alternated (before/after), 1 decode thread:

- ``area``: val (resize 256, centre crop 224, uint8) with ``inter_method=3``;
- ``cubic``: the same with ``inter_method=2`` (native now: OpenCV's own bicubic, IPP off);
- ``imglist``: val with labels from a ``path_imglist`` (``recpipe.mx.record_iter``'s imglist
loader);
- ``getitem``: ``recpipe.torch.RecordDataset[i]`` (val), one sample a call, map-style; where it
  decodes through ``_batch.fill``, ``python us`` is the consumer's CPU outside those calls.

    python experiments/2026-11-25-gil-probes/gil_inter.py /tmp/photos.rec \\
        --recipes area,cubic,imglist,getitem \\
        --trees before=/tmp/before,after=. --rounds 2 --seconds 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # experiments/<note>/ -> the repository
sys.path.insert(0, HERE)
from gil_probe import Probe  # noqa: E402  (gil_probe.py beside it: the outside measurement)

VAL = dict(data_shape=(3, 224, 224), resize=256, dtype="uint8")
RECIPES = ("area", "cubic", "imglist", "getitem")


def _loader(args):
    from recpipe.decode.loader import ImageLoader

    settings = dict(VAL)
    shape = settings.pop("data_shape")
    common = dict(threads=1, shuffle=True)
    if args.recipe == "imglist":
        import recpipe.mx.record_iter as rm

        # the loader recpipe.mx.record_iter.ImageRecordIter(path_imglist=...) builds, without MXNet
        return rm._make_loader(dict(url=args.rec, batch_size=128, data_shape=shape,
                                    **common, **settings), args.imglist)
    inter = {"area": 3, "cubic": 2}[args.recipe]
    return ImageLoader(args.rec, 128, shape, inter_method=inter, **common, **settings)


def _items(args):
    """An endless stream of ``(images delivered, library stats or None)`` steps."""
    if args.recipe == "getitem":
        from recpipe.decode import records
        from recpipe.torch import RecordDataset

        _time_the_run_decoder(records)
        dataset = RecordDataset(args.rec, **VAL)
        index = 0
        while True:
            dataset[(index * 7919) % len(dataset)]
            index += 1
            yield 1, None
    with _loader(args) as loader:
        while True:
            for images, _ in loader:
                yield len(images), loader
    # (never reached)


FILL_CPU = [0.0]  # thread CPU seconds spent inside recpipe._batch.fill (without the GIL)


def _time_the_run_decoder(records):
    """Count the CPU time of ``_batch.fill`` calls (a tree where RecordDataset uses it): the
    rest of the consumer's CPU per item is Python, i.e. GIL-held."""
    batch = records.native_module()
    if batch is None:
        return

    class Timed:
        def __getattr__(self, name):
            return getattr(batch, name)

        def fill(self, *args):
            start = time.thread_time()
            try:
                return batch.fill(*args)
            finally:
                FILL_CPU[0] += time.thread_time() - start

    records.native_module = lambda: Timed()


def child(args):
    stream = _items(args)
    for _ in range(3 if args.recipe != "getitem" else 20):
        next(stream)
    probe = Probe()
    probe.start()
    probe.ready.wait()
    _, loader = next(stream)
    before = loader.stats() if loader is not None else None
    p0, c0, f0 = probe.sample(), time.thread_time(), FILL_CPU[0]
    images = 0
    deadline = time.perf_counter() + args.seconds
    while time.perf_counter() < deadline:
        images += next(stream)[0]
    consumer = time.thread_time() - c0
    p1 = probe.sample()
    probe.stop.set()
    probe.join()
    wall = p1[0] - p0[0]
    waited = max(0.0, wall - (p1[1] - p0[1]) - (p1[2] - p0[2]))
    result = {"images_per_s": images / wall, "probe_gil_us": waited / images * 1e6,
              "consumer_cpu_us": consumer / images * 1e6}
    if FILL_CPU[0] > f0:  # the consumer's CPU outside the C run decoder: its Python
        result["python_us"] = (consumer - (FILL_CPU[0] - f0)) / images * 1e6
    if before is not None:
        after = loader.stats()
        samples = max(1, after["samples"] - before["samples"])
        result["library_gil_us"] = (after["gil_seconds"] - before["gil_seconds"]) / samples * 1e6
    print(json.dumps(result), flush=True)


def _imglist(rec, folder):
    """A .lst giving every record of ``rec`` the label id % 10 + 0.5 by its header id."""
    from recpipe.io.format.header import unpack_header
    from recpipe.io.reader import RecordReader

    path = os.path.join(folder, "labels.lst")
    with RecordReader(rec) as reader, open(path, "w") as f:
        for position in range(len(reader)):
            header, _ = unpack_header(reader[position])
            f.write(f"{header.id}\t{header.id % 10 + 0.5}\timg{position}.jpg\n")
    return path


def point(tree, args, recipe, imglist):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    command = [sys.executable, os.path.abspath(__file__), args.rec, "--child", recipe,
               "--seconds", str(args.seconds), "--imglist", imglist]
    out = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True,
                         timeout=args.seconds + 300)
    if out.returncode != 0:
        raise SystemExit(f"{recipe} on {tree} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec")
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--trees", default=f"this={REPO}",
                        help="comma list of NAME=PATH source trees (alternated)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--child", choices=RECIPES, help=argparse.SUPPRESS)
    parser.add_argument("--imglist", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.recipe = args.child
        return child(args)
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        imglist = _imglist(args.rec, folder)
        for _ in range(args.rounds):
            for recipe in args.recipes.split(","):
                for name, tree in trees.items():
                    results.setdefault((recipe, name), []).append(
                        point(tree, args, recipe, imglist))
    print(f"{args.rec}: medians of {args.rounds} alternated rounds, {args.seconds} s each, "
          "1 decode thread")
    print("recipe    tree      images/s  library us  probe us  consumer cpu us  python us")
    for (recipe, name), runs in results.items():
        row = {key: statistics.median(r[key] for r in runs if key in r) for key in runs[0]}
        print(f"{recipe:9} {name:9} {row['images_per_s']:9.0f} "
              f"{row.get('library_gil_us', float('nan')):11.1f} {row['probe_gil_us']:9.1f} "
              f"{row['consumer_cpu_us']:16.1f} {row.get('python_us', float('nan')):10.1f}")


if __name__ == "__main__":
    main()
