"""``recpipe extract REC OUT``: every image record of a .rec into a folder per label, or tar
shards."""

import json
import sys

from .dask_options import WholeFileJob, add_dask_options
from .options import add_storage_options, storage_options
from .progress import byte_progress

__all__ = ["register", "run"]


def register(subparsers):
    p = subparsers.add_parser(
        "extract", help="write the images of a .rec into folders per label or tar shards",
        description="Write every image record of REC once, bytes unchanged, into OUT (any "
                    "fsspec URL): OUT/<label>/<key>.<ext> and OUT/<stem>.lst (all labels; "
                    "'recpipe pack OUT/<stem>.lst NEW --pass-through --pack-label' packs it "
                    "back), or WebDataset tar shards with --format tar. The folders take the "
                    "class names of the label map 'recpipe pack' wrote beside the .rec "
                    "(X.labels.json) when there is one. InsightFace's header and identity "
                    "records are left out. Run the same command again to continue an "
                    "interrupted extract; a complete one leaves only the images and the list "
                    "(or the shards) in OUT.")
    p.add_argument("src", metavar="REC", help="the .rec file or URL")
    p.add_argument("out", metavar="OUT", help="output folder or URL")
    add_storage_options(p)
    p.add_argument("--index", default=None, help="the .idx (default: beside the .rec)")
    p.add_argument("--format", choices=("folder", "tar"), default="folder",
                   help="folder per label (default) or WebDataset-style tar shards")
    p.add_argument("--shard-size", default="256MB", metavar="SIZE",
                   help="bytes of images per tar shard / resumable chunk (default 256MB)")
    p.add_argument("--workers", type=int, default=None,
                   help="chunks extracted at once (default 8); with --dask local, the "
                        "cluster's worker processes (default: one per core)")
    names = p.add_mutually_exclusive_group()
    names.add_argument("--numeric-folders", action="store_true",
                       help="name the folders by label number even when a label map names "
                            "the classes")
    names.add_argument("--label-map", default=None, metavar="FILE",
                       help="the label map to take the class names from (default: the "
                            "X.labels.json of 'recpipe pack' beside the .rec, when it lists it)")
    p.add_argument("--overwrite", action="store_true",
                   help="write into an OUT that already holds files (e.g. a complete extract)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_dask_options(p, "extract the chunks (of the .idx)", workers=False, chunks=False)
    p.set_defaults(func=run)


def run(args):
    from ..packing.extract import extract_records
    from ..packing.packer import parse_size

    shard_size = parse_size(args.shard_size)
    job = WholeFileJob(args)  # --dask: the chunks extracted by tasks on a cluster
    workers = {} if args.dask else {"workers": 8 if args.workers is None else args.workers}
    with byte_progress(not (args.no_progress or args.json), "extract") as progress:
        summary = job.call(extract_records, "extract_on_cluster", args.src, args.out,
                           index_url=args.index, format=args.format, shard_size=shard_size,
                           storage_options=storage_options(args), progress=progress,
                           label_map=False if args.numeric_folders else args.label_map,
                           overwrite=args.overwrite, **workers)
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
        return 0
    resumed = (f", {summary.resumed_chunks} kept from an earlier run"
               if summary.resumed_chunks else "")
    print(f"extracted {summary.images} images ({summary.bytes / 1e6:.1f} MB) into {summary.out} "
          f"in {summary.seconds:.2f}s ({summary.chunks} chunk(s){resumed})", file=sys.stdout)
    if summary.skipped_records:
        print(f"  {summary.skipped_records} structure records left out (InsightFace header and "
              "identities)")
    if summary.label_map:
        print(f"  folders named by the classes of {summary.label_map} (--numeric-folders: "
              "by label number)")
    if summary.list_file:
        print(f"  list: {summary.list_file}")
    if summary.shards:
        print(f"  shards: {summary.shards[0]}{' ...' if len(summary.shards) > 1 else ''}")
    job.print_run()
    return 0
