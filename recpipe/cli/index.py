"""``recpipe index``: write a fresh ``.idx`` for a ``.rec`` (on a Dask cluster with ``--dask``)."""

import json
import sys

from ..io.sidecars.index import index_url_for
from ..io.sidecars.rebuild import rebuild_index
from ..io.sources import exists
from .dask_options import WholeFileJob, add_dask_options
from .options import add_storage_options, storage_options
from .progress import byte_progress

__all__ = ["register", "run_index"]


def register(subparsers):
    p = subparsers.add_parser("index", help="rebuild a lost or broken .idx",
                              description="Write a fresh .idx for a RecordIO file. Keys are the "
                                          "IRHeader ids when every record has one and they are "
                                          "unique, else positions 0..N-1.")
    p.add_argument("file", help=".rec file (path or fsspec URL)")
    p.add_argument("-o", "--output", metavar="OUT.idx",
                   help="index to write (default: beside FILE)")
    p.add_argument("--positions", action="store_true",
                   help="key by position 0..N-1 like mxnet's tools/rec2idx.py")
    p.add_argument("--skip-bad", action="store_true",
                   help="index only the readable records of a corrupt file")
    p.add_argument("--force", action="store_true", help="replace an existing index")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_storage_options(p, short=False)  # -o is --output here
    add_dask_options(p, "read the record heads")
    p.set_defaults(func=run_index)


def run_index(args):
    output = args.output or index_url_for(args.file)
    job = WholeFileJob(args)  # --dask: the heads listed by chunk tasks on a cluster
    if exists(output, storage_options(args)) and not args.force:
        print(f"recpipe index: {output} exists; pass --force to replace it", file=sys.stderr)
        return 1
    with byte_progress(not (args.no_progress or args.json), "index") as progress:
        result = job.call(rebuild_index, "index_on_cluster", args.file, output,
                          positions=args.positions, skip_bad=args.skip_bad, progress=progress,
                          storage_options=storage_options(args))
    if args.json:
        print(json.dumps({**result._asdict(),
                          "dask": job.run.to_dict() if job.run is not None else None}, indent=2))
        return 0
    print(f"wrote {result.index_url}: {result.records} entries keyed by {result.keys} "
          f"({result.reason})")
    if result.skipped:
        print(f"  skipped {result.skipped} unreadable byte range(s)", file=sys.stderr)
    job.print_run()
    return 0
