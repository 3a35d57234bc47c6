"""``recpipe demo``: pack a built-in generated sample, run the decode pipeline, print throughput."""

import os
import sys
import tempfile

__all__ = ["register", "run"]


def register(subparsers):
    p = subparsers.add_parser(
        "demo", help="pack a generated sample, decode it and print the throughput table",
        description="Generate a small sample of photo-like JPEGs in class folders, pack them with "
                    "`recpipe pack`, then measure bare decode and the train/val pipelines.")
    p.add_argument("--out", help="keep the sample and the packed files in this folder "
                                 "(default: a temporary folder, removed at the end)")
    p.add_argument("--classes", type=int, default=4,
                   help="classes of generated images (default 4)")
    p.add_argument("--per-class", type=int, default=64, help="images per class (default 64)")
    p.add_argument("--seconds", type=float, default=0.5,
                   help="timed seconds per run; each figure is the median of 3 (default 0.5)")
    p.add_argument("--threads", type=int, default=None,
                   help="decode threads (default: usable cores)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=run)


def run(args):
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        return _demo(args, args.out)
    with tempfile.TemporaryDirectory(prefix="recpipe-demo-") as folder:
        return _demo(args, folder)


def _demo(args, folder):
    from ..decode import bench
    from ..report.doctor import slow_paths
    from ..packing.packer import pack_dataset
    from ..report.sample import make_sample_images
    from .bench import print_results

    images_dir = os.path.join(folder, "images")
    _say(args, f"generating {args.classes * args.per_class} sample images in {images_dir} ...")
    make_sample_images(images_dir, classes=args.classes, per_class=args.per_class)
    prefix = os.path.join(folder, "sample")
    summary = pack_dataset(images_dir, prefix, pass_through=True)
    if not summary.ok:
        print(f"recpipe demo: packing failed for {summary.failed} images", file=sys.stderr)
        return 1
    written = [shard for shards in summary.splits.values() for shard in shards]
    rec = written[0].rec
    _say(args, f"packed {summary.written} images ({summary.output_bytes / 1e6:.1f} MB) in "
               f"{summary.seconds:.2f} s: " + ", ".join(s.rec for s in written))
    _say(args, "measuring bare decode and the train/val pipelines ...")
    results = bench.measure(rec, list(bench.CONFIGS), threads=args.threads, batch_size=64,
                            seconds=args.seconds, repeats=3)
    results["pack"] = summary.to_dict()
    results["peak_rss_mb"] = bench.peak_rss_mb()
    print_results(results, args.json)
    missing = slow_paths()
    if missing:
        print(f"note: running without {', '.join(missing)} (slower paths): run `recpipe doctor` "
              "to see what they cost here and how to install them", file=sys.stderr)
    return 0


def _say(args, message):
    print(message, file=sys.stderr if args.json else sys.stdout)
