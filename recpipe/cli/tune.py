"""``recpipe tune FILE --step-ms T``: autotune the decode threads against a simulated accelerator.

The consumer sleeps ``T`` ms per batch (sleeping releases the GIL, as waiting on a CUDA sync
does); the loader runs with ``threads="auto"``. Decisions are printed as they happen, then the
report (``--json``: the report as JSON on stdout, the live decisions on stderr).
"""

import json
import sys
import time

from .bench import plot_problem, write_plot
from .options import (BATCH_HELP, DECODER_HELP, DECODERS, DTYPE_HELP, add_storage_options,
                      storage_options)

__all__ = ["register", "run", "format_report"]


def register(subparsers):
    p = subparsers.add_parser(
        "tune", help="autotune decode threads against a simulated accelerator",
        description="Run the decode pipeline with threads='auto' against a consumer that takes "
                    "STEP_MS per batch; print each autotune decision and the final report.")
    p.add_argument("file", help=".rec file (any fsspec URL)")
    add_storage_options(p)
    p.add_argument("--plot", metavar="PNG", help="write the autotuner's decisions as a chart "
                                                 "(matplotlib, recpipe[plot])")
    p.add_argument("--step-ms", type=float, required=True,
                   help="simulated accelerator time per batch, in milliseconds")
    p.add_argument("--seconds", type=float, default=30.0, help="how long to run (default 30)")
    p.add_argument("--config", default="train", choices=["train", "val"],
                   help="augmentation: train (random resized crop, flip) or val (resize, centre "
                        "crop), as in `recpipe bench` (default train)")
    p.add_argument("--batch-size", type=int, default=128, help=BATCH_HELP)
    p.add_argument("--dtype", default="uint8", choices=["uint8", "float32", "float16"],
                   help=DTYPE_HELP)
    p.add_argument("--decoder", default="auto", choices=DECODERS, help=DECODER_HELP)
    p.add_argument("--max-threads", type=int, default=None,
                   help="upper bound for the tuner (default: twice the usable cores)")
    p.add_argument("--window-batches", type=int, default=8,
                   help="batches per decision window (default 8)")
    p.add_argument("--window-seconds", type=float, default=1.5,
                   help="minimum seconds per decision window (default 1.5)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args):
    from ..decode.bench import CONFIGS
    from ..decode.loader import ImageLoader

    if args.step_ms < 0 or args.seconds <= 0:
        print("recpipe tune: --step-ms must be >= 0 and --seconds > 0", file=sys.stderr)
        return 2
    problem = plot_problem(args.plot) if args.plot else None
    if problem:
        print(f"recpipe tune: --plot {args.plot}: {problem} (nothing was run)", file=sys.stderr)
        return 2
    settings = dict(CONFIGS[args.config])
    data_shape = settings.pop("data_shape")
    live = sys.stderr if args.json else sys.stdout
    with ImageLoader(args.file, args.batch_size, data_shape, threads=1, shuffle=True,
                     storage_options=storage_options(args),
                     dtype=args.dtype, decoder=args.decoder, **settings) as loader:
        tuner = loader.enable_autotune(max_threads=args.max_threads,
                                       window_batches=args.window_batches,
                                       window_seconds=args.window_seconds)
        tuner.add_listener(lambda decision: print(decision.describe(), file=live, flush=True))
        print(f"tuning {args.file}: step {args.step_ms:g} ms/batch, batch {args.batch_size}, "
              f"{args.config}, starting at {loader.threads} threads", file=live, flush=True)
        images, elapsed = _consume(loader, args.step_ms / 1e3, args.seconds)
        report = loader.autotune_report()
    report["images_per_s_overall"] = images / elapsed
    report["step_ms"] = args.step_ms
    report["state"] = "tuning" if report["reason"] == "TUNING" else "settled"
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    if args.plot:  # after the report: a missing plot extra must not lose the run
        return write_plot("tune", "plot_tune", report, args.plot,
                          f"recpipe tune {args.file}: step {args.step_ms:g} ms",
                          say=lambda message: print(message, file=live))
    return 0


def _consume(loader, step, seconds):
    """Take batches for ``seconds``, sleeping ``step`` per batch; returns (images, elapsed)."""
    start = time.perf_counter()
    images = 0
    while True:
        for batch, _ in loader:
            time.sleep(step)
            images += len(batch)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return images, elapsed


def format_report(report):
    """The report as a few readable lines."""
    wait = report["wait_fraction"]
    tuning = report["reason"] == "TUNING"
    if tuning:  # the run ended mid-search: nothing settled
        verdict = (f"still TUNING when the run ended (the consumer still waits "
                   f"{_pct(wait['after'])}; the tuner was still measuring whether more threads "
                   "pay: run longer, --seconds, to let it settle)")
        when = (f"threads last changed at window {report['settled_window']}"
                if report["settled_window"] else "no thread change kept yet")
    else:
        verdict = report["reason"]
        when = f"settled at window {report['settled_window']}"
    lines = [
        f"threads {report['threads']}, prefetch {report['prefetch']}: {verdict}",
        f"  consumer wait {_pct(wait['before'])} before -> {_pct(wait['after'])} after; "
        f"{report['images_per_s_overall']:.0f} images/s overall",
        f"  {report['windows']} windows, {report['changes']} changes, {when}; "
        f"{report['cores']} usable cores ({report['cores_source']})",
    ]
    if report.get("cpu_per_image"):
        x_max = report["x_max_images_per_s"]
        lines.append(f"  {report['cpu_per_image'] * 1e3:.2f} CPU-ms per image, CPU bound "
                     f"~{x_max:.0f} images/s, process CPU {_pct(report['cpu_util'])} of the cores")
    lines += _saturation_note(report)
    lines += [f"  warning: {w}" for w in report["warnings"]]
    return "\n".join(lines)


def _saturation_note(report):
    """CPU_SATURATED while this process uses a small share of the cores: other processes
    hold them (the run queue and CPU pressure say so), which the bare figures leave unsaid."""
    util = report.get("cpu_util")
    if report.get("reason") != "CPU_SATURATED" or util is None or util >= 0.75:
        return []
    from ..decode.cpu_meter import busy_evidence

    evidence = busy_evidence(report.get("run_queue_share"),
                             report.get("cpu_pressure_some_avg10"))
    why = f" ({'; '.join(evidence)})" if evidence else ""
    return [f"  CPU_SATURATED at process CPU {util:.0%}: other processes hold the cores{why}; "
            "more decode threads would not help"]


def _pct(value):
    return "n/a" if value is None else f"{value:.1%}"
