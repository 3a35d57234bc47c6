"""``recpipe retrofit FILE.rec ...``: give the JPEGs of packed files restart markers, losslessly."""

import json
import sys

from .options import add_storage_options, storage_options

__all__ = ["register", "run"]


def register(subparsers):
    p = subparsers.add_parser(
        "retrofit", help="add restart markers to the JPEGs of packed .rec files (lossless)",
        description="Rewrite each FILE.rec with restart markers in its JPEGs, as `recpipe pack "
                    "--restart` writes them: the DCT coefficients are written back (checked; "
                    "same pixels for every decoder, optimal Huffman tables), so that a random "
                    "crop decodes only the intervals it touches. Record headers, labels, keys "
                    "and order are kept; progressive JPEGs, PNGs and other records are copied "
                    "as they are. The new .rec, .idx, .sums and .sources.jsonl are published "
                    "as one commit, over FILE (default) or at --out; nothing is published on "
                    "an error.")
    p.add_argument("files", nargs="+", metavar="FILE.rec", help=".rec files (paths or URLs)")
    p.add_argument("--out", metavar="OUT", default=None,
                   help="publish the result here (a .rec URL or prefix; one FILE only) "
                        "instead of replacing FILE")
    p.add_argument("--restart", default="auto", metavar="ROWS|auto",
                   help="'auto' (intervals of about 4 MCUs, default) or MCU rows per interval")
    p.add_argument("--threads", type=int, default=None,
                   help="transcoding threads (default: usable cores)")
    p.add_argument("--no-sources", dest="sources", action="store_false",
                   help="leave the .sources.jsonl sidecar out of the result")
    p.add_argument("--json", action="store_true", help="print the summaries as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_storage_options(p)
    p.set_defaults(func=run)


def _bar(enabled, name):
    if not enabled:
        return None, lambda done, total: None
    import tqdm

    tqdm.tqdm.monitor_interval = 0  # no monitor thread
    bar = tqdm.tqdm(unit="rec", file=sys.stderr, leave=False, dynamic_ncols=True, desc=name)

    def update(done, total):
        bar.total = total
        bar.update(done - bar.n)

    return bar, update


def run(args):
    from ..packing.retrofit import retrofit_restarts

    if args.out is not None and len(args.files) != 1:
        print("recpipe retrofit: error: --out takes one FILE", file=sys.stderr)
        return 2
    if args.threads is not None and args.threads < 1:
        print("recpipe retrofit: error: --threads must be >= 1", file=sys.stderr)
        return 2
    summaries = []
    for name in args.files:
        bar, update = _bar(not (args.no_progress or args.json) and sys.stderr.isatty(), name)
        try:
            summaries.append(retrofit_restarts(name, args.out, restart=args.restart,
                                               threads=args.threads, sources=args.sources,
                                               storage_options=storage_options(args),
                                               progress=update))
        finally:
            if bar is not None:
                bar.close()
    if args.json:
        print(json.dumps([s.to_dict() for s in summaries], indent=2))
        return 0
    for s in summaries:
        change = (s.output_bytes - s.input_bytes) / s.input_bytes if s.input_bytes else 0.0
        print(f"{s.out}: {s.restarted} of {s.records} images given restart markers "
              f"({s.restart}), {s.unchanged} copied as they were; {s.input_bytes / 1e6:.1f} MB "
              f"-> {s.output_bytes / 1e6:.1f} MB ({change:+.1%}) in {s.seconds:.2f}s"
              f"{'; sources sidecar carried over' if s.sources else ''}")
    return 0
