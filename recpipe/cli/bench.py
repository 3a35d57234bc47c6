"""``recpipe bench FILE``: decode throughput, per-stage cost and thread scaling."""

import json
import sys

from .options import add_storage_options, storage_options

__all__ = ["register", "run"]


def register(subparsers):
    p = subparsers.add_parser(
        "bench", help="measure decode throughput, per-stage cost and thread scaling of a .rec",
        description="Measure bare decode rate, full pipeline rate (train and val configurations), "
                    "per-stage cost, a thread sweep and memory on a RecordIO file.")
    p.add_argument("file", help=".rec file (any fsspec URL)")
    add_storage_options(p)
    p.add_argument("--configs", default="train,val", help="comma list of train,val (default both)")
    p.add_argument("--threads", type=int, default=None, help="decode threads (default: usable cores)")
    p.add_argument("--sweep", action="store_true", help="also run a thread sweep 1..cores")
    p.add_argument("--max-threads", type=int, default=None, help="top of the thread sweep")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per measurement")
    p.add_argument("--dtype", default="uint8", choices=["uint8", "float32", "float16"])
    p.add_argument("--decoder", default="auto", help="auto, turbojpeg, simplejpeg or opencv")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--plot", metavar="PNG", help="write the thread sweep as a PNG chart")
    p.add_argument("--trace", metavar="JSON", help="write a Chrome trace of the first configuration's stages")
    p.set_defaults(func=run)


def run(args):
    from ..decode import bench

    configs = [c for c in args.configs.split(",") if c]
    if any(name not in bench.CONFIGS for name in configs):
        print(f"recpipe bench: unknown configuration in {args.configs!r}: choose from "
              f"{', '.join(bench.CONFIGS)}", file=sys.stderr)
        return 2
    results = bench.measure(args.file, configs, threads=args.threads,
                            batch_size=args.batch_size, seconds=args.seconds, dtype=args.dtype,
                            decoder=args.decoder, trace_path=args.trace,
                            say=lambda message: _say(args, message),
                            storage_options=storage_options(args))
    if args.sweep or args.plot:
        top = args.max_threads or bench.usable_cores()
        first = next(iter(results["configs"]), "train")
        _say(args, f"thread sweep 1..{top} ({first})...")
        results["sweep"] = [
            {"threads": r["threads"], "images_per_s": r["images_per_s"]}
            for r in bench.thread_sweep(args.file, bench.CONFIGS[first], range(1, top + 1),
                                        batch_size=args.batch_size, seconds=args.seconds,
                                        dtype=args.dtype, decoder=args.decoder,
                                        storage_options=storage_options(args))]
        if args.plot:
            _plot_sweep(results["sweep"], args.plot, f"{first} pipeline, {args.file}")
    results["peak_rss_mb"] = bench.peak_rss_mb()
    print_results(results, args.json)
    return 0


def print_results(results, as_json):
    print(json.dumps(results, indent=2) if as_json else format_table(results))


def _say(args, message):
    if not args.json:
        print(message, file=sys.stderr)


def format_table(results):
    lines = [f"{results['file']}: {results['threads']} threads, batch {results['batch_size']}, "
             f"{results['dtype']}, decoder {results['decoder']}",
             f"  bare decode (full size): {results['bare_decode_images_per_s']:8.1f} images/s", ""]
    header = f"  {'config':8} {'images/s':>9} {'x bare':>7} {'wait':>6}  per image ms: " \
             f"{'read':>6} {'decode':>7} {'augment':>8} {'batch':>6}"
    lines.append(header)
    for name, r in results["configs"].items():
        ms = r["stage_ms_per_image"]
        lines.append(f"  {name:8} {r['images_per_s']:9.1f} {r['vs_bare_decode']:7.2f} "
                     f"{r['wait_fraction']:6.0%}  {'':14}{ms['read']:6.2f} {ms['decode']:7.2f} "
                     f"{ms['augment']:8.2f} {ms['batch']:6.2f}")
    for point in results.get("sweep", []):
        if point is results["sweep"][0]:
            lines += ["", "  thread sweep:"]
        lines.append(f"    {point['threads']:3d} threads  {point['images_per_s']:8.1f} images/s")
    lines.append(f"  peak RSS {results['peak_rss_mb']:.0f} MiB")
    return "\n".join(lines)


def _plot_sweep(sweep, path, title):
    """A small line chart drawn with OpenCV (no plotting library needed)."""
    import cv2
    import numpy as np

    width, height, margin = 640, 400, 60
    img = np.full((height, width, 3), 255, np.uint8)
    top = max(p["images_per_s"] for p in sweep) * 1.1 or 1.0
    xs = [p["threads"] for p in sweep]
    span = max(1, max(xs) - min(xs))

    def point(p):
        x = margin + (p["threads"] - min(xs)) * (width - 2 * margin) / span
        y = height - margin - p["images_per_s"] * (height - 2 * margin) / top
        return int(x), int(y)

    cv2.line(img, (margin, height - margin), (width - margin, height - margin), (0, 0, 0), 1)
    cv2.line(img, (margin, margin), (margin, height - margin), (0, 0, 0), 1)
    for a, b in zip(sweep, sweep[1:]):
        cv2.line(img, point(a), point(b), (200, 80, 0), 2, cv2.LINE_AA)
    for p in sweep:
        cv2.circle(img, point(p), 4, (200, 80, 0), -1, cv2.LINE_AA)
        cv2.putText(img, f"{p['images_per_s']:.0f}", (point(p)[0] - 15, point(p)[1] - 10),
                    cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1, cv2.LINE_AA)
        cv2.putText(img, str(p["threads"]), (point(p)[0] - 4, height - margin + 18),
                    cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, title[:70], (margin, 30), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1,
                cv2.LINE_AA)
    cv2.putText(img, "threads", (width // 2 - 25, height - 15), cv2.FONT_HERSHEY_SIMPLEX, 0.5,
                (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, "images/s", (5, margin - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1,
                cv2.LINE_AA)
    if not cv2.imwrite(path, img):
        raise OSError(f"could not write the plot to {path}")
