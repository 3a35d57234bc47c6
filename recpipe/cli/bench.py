"""``recpipe bench FILE``: decode throughput, per-stage cost and thread scaling."""

import json
import sys

from ..system.host import node_share
from .options import (BATCH_HELP, DECODER_HELP, DECODERS, DTYPE_HELP, add_storage_options,
                      storage_options)

__all__ = ["register", "run"]


def register(subparsers):
    p = subparsers.add_parser(
        "bench", help="measure decode throughput, per-stage cost and thread scaling of a .rec",
        description="Measure bare decode rate, full pipeline rate (train and val configurations), "
                    "per-stage cost, a thread sweep and memory on a RecordIO file.")
    p.add_argument("file", help=".rec file (any fsspec URL)")
    add_storage_options(p)
    p.add_argument("--configs", default="train,val",
                   help="comma list of train,val,faces (default train,val; faces: 112x112 "
                        "output with a random flip)")
    p.add_argument("--threads", type=int, default=None, help="decode threads (default: usable cores)")
    p.add_argument("--sweep", action="store_true", help="also run a thread sweep 1..cores")
    p.add_argument("--max-threads", type=int, default=None, help="top of the thread sweep")
    p.add_argument("--batch-size", type=int, default=128, help=BATCH_HELP)
    p.add_argument("--seconds", type=float, default=3.0,
                   help="timed seconds per measurement (default 3)")
    p.add_argument("--dtype", default="uint8", choices=["uint8", "float32", "float16"],
                   help=DTYPE_HELP)
    p.add_argument("--decoder", default="auto", choices=DECODERS, help=DECODER_HELP)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--plot", metavar="PNG", help="write a chart (matplotlib, recpipe[plot]): images/s against threads "
                        "with the ideal and bare-decode lines, and the cost of each stage")
    p.add_argument("--trace", metavar="JSON", help="write a Chrome trace of the first configuration's stages")
    p.set_defaults(func=run)


def run(args):
    from ..decode import bench

    configs = [c for c in args.configs.split(",") if c]
    if any(name not in bench.CONFIGS for name in configs):
        print(f"recpipe bench: unknown configuration in {args.configs!r}: choose from "
              f"{', '.join(bench.CONFIGS)}", file=sys.stderr)
        return 2
    _check_inputs(args)  # a missing file, not RecordIO, an unknown decoder: before any output
    results = bench.measure(args.file, configs, threads=args.threads,
                            batch_size=args.batch_size, seconds=args.seconds, dtype=args.dtype,
                            decoder=args.decoder, trace_path=args.trace,
                            say=lambda message: _say(args, message),
                            storage_options=storage_options(args))
    if args.sweep or args.plot:
        top = args.max_threads or node_share()[0]
        first = next(iter(results["configs"]), "train")
        _say(args, f"thread sweep 1..{top} ({first})...")
        results["sweep"] = [
            {"threads": r["threads"], "images_per_s": r["images_per_s"]}
            for r in bench.thread_sweep(args.file, bench.CONFIGS[first], range(1, top + 1),
                                        batch_size=args.batch_size, seconds=args.seconds,
                                        dtype=args.dtype, decoder=args.decoder,
                                        storage_options=storage_options(args))]
    results["peak_rss_mb"] = bench.peak_rss_mb()
    print_results(results, args.json)  # first: a missing plot extra must not lose the run
    if args.plot:
        first = next(iter(results["configs"]), "train")
        return write_plot("bench", "plot_bench", results, args.plot,
                          f"recpipe bench {args.file} ({first} sweep)", say=lambda m: _say(args, m))
    return 0


def write_plot(command, function, data, path, title, say):
    """Draw ``data`` with ``recpipe.report.plots.<function>`` into ``path``; without matplotlib, say
    that the plot needs the ``plot`` extra (the results are printed already) and return 1."""
    from ..report import plots

    try:
        getattr(plots, function)(data, path, title)
    except ImportError as exc:
        print(f"recpipe {command}: no plot written to {path}: {exc}", file=sys.stderr)
        return 1
    say(f"wrote {path}")
    return 0


def _check_inputs(args):
    """Raise the error a bad FILE or --decoder would raise mid-run, before anything is printed:
    the decoder by name, the file's first record head (an image or .idx is named as such)."""
    from ..decode.decoders import get_decoder
    from ..io.scan import SlidingBuffer, read_record
    from ..io.sources import open_source

    get_decoder(args.decoder)
    with open_source(args.file, storage_options(args)) as source:
        if source.size:
            read_record(SlidingBuffer(source, 1 << 16, 0), 0, record=0, keep_payload=False)


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
             f"{'read':>6} {'decode':>7} {'augment':>8} {'batch':>6}  {'GIL us':>7} " \
             f"{'ceiling/s':>10}"
    lines.append(header)
    for name, r in results["configs"].items():
        ms = r["stage_ms_per_image"]
        ceiling = r.get("gil_ceiling_images_per_s")
        lines.append(f"  {name:8} {r['images_per_s']:9.1f} {r['vs_bare_decode']:7.2f} "
                     f"{r['wait_fraction']:6.0%}  {'':14}{ms['read']:6.2f} {ms['decode']:7.2f} "
                     f"{ms['augment']:8.2f} {ms['batch']:6.2f}  {r['gil_us_per_image']:7.1f} "
                     f"{ceiling or float('inf'):10.0f}")
    lines += ["", "  wait: share of the run the consumer spent waiting for batches; bench's "
              "consumer does no",
              "  work, so ~100% is expected here: the decode pipeline sets the pace "
              "(see `recpipe tune`)",
              "  GIL us: worker CPU per image outside C calls that release the GIL (Python),",
              "  serial whatever the cores; ceiling/s = 1e6 / GIL us, the most any core count "
              "reaches"]
    for point in results.get("sweep", []):
        if point is results["sweep"][0]:
            lines += ["", "  thread sweep:"]
        lines.append(f"    {point['threads']:3d} threads  {point['images_per_s']:8.1f} images/s")
    lines.append(f"  peak RSS {results['peak_rss_mb']:.0f} MiB")
    return "\n".join(lines)
