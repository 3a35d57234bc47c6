"""``recpipe bench FILE``: decode throughput, per-stage cost and thread scaling.

Every figure is the median of ``--repeats`` runs, interleaved with the others, with its range;
every run records the CPU it got, so a busy machine is reported (and CPU ms per image, which
the load does not change, compares configurations anyway). ``--plot`` checks that matplotlib is
there before anything runs.
"""

import json
import os
import sys
import textwrap

from ..system.host import node_share
from .options import (BATCH_HELP, DECODER_HELP, DECODERS, DTYPE_HELP, add_storage_options,
                      storage_options)

__all__ = ["register", "run", "format_table", "plot_problem"]


def register(subparsers):
    p = subparsers.add_parser(
        "bench", help="measure decode throughput, per-stage cost and thread scaling of a .rec",
        description="Measure bare decode rate, full pipeline rate (train and val configurations), "
                    "per-stage cost, a thread sweep and memory on a RecordIO file. Each figure is "
                    "the median of --repeats interleaved runs, with the CPU the runs got and a "
                    "warning when other processes hold the cores.")
    p.add_argument("file", help=".rec file (any fsspec URL)")
    add_storage_options(p)
    p.add_argument("--configs", default="train,val",
                   help="comma list of train,val,faces (default train,val; faces: 112x112 "
                        "output with a random flip)")
    p.add_argument("--threads", type=int, default=None,
                   help="decode threads (default: usable cores)")
    p.add_argument("--sweep", action="store_true", help="also run a thread sweep 1..cores")
    p.add_argument("--max-threads", type=int, default=None, help="top of the thread sweep")
    p.add_argument("--batch-size", type=int, default=128, help=BATCH_HELP)
    p.add_argument("--seconds", type=float, default=1.0,
                   help="timed seconds per run (default 1)")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs per figure, interleaved; the figure is their median (default 3)")
    p.add_argument("--dtype", default="uint8", choices=["uint8", "float32", "float16"],
                   help=DTYPE_HELP)
    p.add_argument("--decoder", default="auto", choices=DECODERS, help=DECODER_HELP)
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--plot", metavar="PNG",
                   help="write a chart (matplotlib, recpipe[plot]): images/s against threads "
                        "with the ideal and bare-decode lines, and the cost of each stage")
    p.add_argument("--trace", metavar="JSON",
                   help="write a Chrome trace of the first configuration's stages")
    p.set_defaults(func=run)


def plot_problem(path):
    """Why a chart could not be written to ``path`` (matplotlib missing, no such folder), or
    None: checked before a run, so a long measurement is not lost to it."""
    from .._optional import require

    try:
        require("matplotlib", "plot")
    except ImportError as exc:
        return str(exc)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"no folder {folder} to write it in"
    return None


def run(args):
    from ..decode import bench

    configs = [c for c in args.configs.split(",") if c]
    if any(name not in bench.CONFIGS for name in configs):
        print(f"recpipe bench: unknown configuration in {args.configs!r}: choose from "
              f"{', '.join(bench.CONFIGS)}", file=sys.stderr)
        return 2
    if args.repeats < 1 or args.seconds <= 0:
        print("recpipe bench: --repeats must be >= 1 and --seconds > 0", file=sys.stderr)
        return 2
    problem = plot_problem(args.plot) if args.plot else None
    if problem:
        print(f"recpipe bench: --plot {args.plot}: {problem} (nothing was measured)",
              file=sys.stderr)
        return 2
    _check_inputs(args)  # a missing file, not RecordIO, an unknown decoder: before any output
    sweep = range(1, (args.max_threads or node_share()[0]) + 1) \
        if args.sweep or args.plot else ()
    results = bench.measure(args.file, configs, threads=args.threads,
                            batch_size=args.batch_size, seconds=args.seconds, dtype=args.dtype,
                            decoder=args.decoder, trace_path=args.trace,
                            say=lambda message: _say(args, message),
                            storage_options=storage_options(args), repeats=args.repeats,
                            sweep=sweep)
    results["peak_rss_mb"] = bench.peak_rss_mb()
    print_results(results, args.json)
    busy = results["machine"]["busy"]
    if busy and args.json:  # the table says it itself
        print(f"recpipe bench: warning: {busy}", file=sys.stderr)
    if args.plot:
        first = results.get("sweep_config") or next(iter(results["configs"]), "train")
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
    from ..io.format.scan import SlidingBuffer, read_record
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


def _stage(value):
    """A stage's ms per image; a stage with no time of its own is fused into the decode."""
    if value == 0:
        return "fused"
    return f"{value:.2f}" if value >= 0.01 else "<0.01"


def _range(summary):
    low, high = summary.get("images_per_s_spread") or (summary["images_per_s"],) * 2
    return f"{low:.0f}-{high:.0f}"


def _cores(summary):
    used = summary.get("cores_used")
    return "n/a" if used is None else f"{used:.2f}"


def _cpu_ms(summary):
    value = summary.get("cpu_ms_per_image")
    return "n/a" if value is None else f"{value:.2f}"


def format_table(results):
    machine = results.get("machine") or {}
    cores = machine.get("cores")
    runs = results.get("repeats", 1)
    lines = [f"{results['file']}: {results['threads']} threads"
             + (f" ({cores} usable cores)" if cores else "")
             + f", batch {results['batch_size']}, {results['dtype']}, decoder {results['decoder']}"]
    if runs > 1:
        lines.append(f"  each figure: the median of {runs} runs of "
                     f"{results.get('seconds_per_run', 0):g} s, interleaved with the others; "
                     "range: slowest-fastest run")
    if machine.get("load_average"):
        low, high = machine["load_average"]
        pressure = machine.get("cpu_pressure")
        lines.append(f"  load average {low:.1f}-{high:.1f} during the runs"
                     + (f", CPU pressure {pressure[0]:.0f}-{pressure[1]:.0f}%" if pressure else ""))
    if machine.get("busy"):
        lines += textwrap.wrap(f"warning: {machine['busy']}", 96, initial_indent="  ",
                               subsequent_indent="    ")
    bare = results.get("bare_decode") or {"images_per_s": results["bare_decode_images_per_s"]}
    lines += [f"  bare decode (full size): {bare['images_per_s']:8.1f} images/s"
              + (f" ({_range(bare)}), {_cores(bare)} cores used, {_cpu_ms(bare)} CPU ms/image"
                 if "cores_used" in bare else ""), ""]
    header = (f"  {'config':8} {'images/s':>9} {'range':>11} {'x bare':>7} {'wait':>6} "
              f"{'cores':>6} {'CPU ms':>7}  {'GIL us':>7} {'ceiling/s':>10}")
    lines.append(header)
    for name, r in results["configs"].items():
        ceiling = r.get("gil_ceiling_images_per_s")
        lines.append(f"  {name:8} {r['images_per_s']:9.1f} {_range(r):>11} "
                     f"{r['vs_bare_decode']:7.2f} {r['wait_fraction']:6.0%} {_cores(r):>6} "
                     f"{_cpu_ms(r):>7}  {r['gil_us_per_image']:7.1f} "
                     f"{ceiling or float('inf'):10.0f}")
    lines += ["", f"  {'ms per image':13} {'read':>7} {'decode':>7} {'augment':>8} {'batch':>7}"]
    for name, r in results["configs"].items():
        ms = r["stage_ms_per_image"]
        lines.append(f"  {name:13} {_stage(ms['read']):>7} {_stage(ms['decode']):>7} "
                     f"{_stage(ms['augment']):>8} {_stage(ms['batch']):>7}")
    lines += ["",
              "  wait: share of the run the consumer spent waiting for batches; bench's "
              "consumer does no",
              "  work, so ~100% is expected here: the decode pipeline sets the pace "
              "(see `recpipe tune`)",
              "  cores: process CPU time / wall time over the runs, the cores the threads "
              "actually got",
              "  CPU ms: CPU time per image (all threads): the cost, whatever the load",
              "  GIL us: worker CPU per image outside C calls that release the GIL (Python),",
              "  serial whatever the cores; ceiling/s = 1e6 / GIL us, the most any core count "
              "reaches",
              "  ms per image: thread time in each stage; fused: done inside the native "
              "decode call (one C call",
              "  reads, decodes, augments; timed as decode), not free"]
    sweep = results.get("sweep") or []
    if sweep:
        lines += ["", f"  thread sweep ({results.get('sweep_config', '')}; the row at "
                      f"{results['threads']} threads is the table's):"]
    for point in sweep:
        unit = "thread " if point["threads"] == 1 else "threads"
        lines.append(f"    {point['threads']:3d} {unit}  {point['images_per_s']:8.1f} images/s"
                     + (f" ({_range(point)}), {_cores(point)} cores used"
                        if "cores_used" in point else ""))
    lines.append(f"  peak RSS {results['peak_rss_mb']:.0f} MiB")
    return "\n".join(lines)
