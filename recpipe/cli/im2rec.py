"""``recpipe im2rec``: a drop-in for MXNet's ``tools/im2rec.py`` (same arguments, same files)."""

import argparse
import os
import sys
import time

from ..mx.im2rec import im2rec_options, pack_prefix
from ..packing.listing import DEFAULT_EXTS, make_lists

__all__ = ["register", "run"]

EXIT_SKIPPED = 3
PROGRESS_EVERY = 1000
SHOW_SKIPPED = 20

DESCRIPTION = """\
Create an image list (--list), or make a record database from every <prefix>*.lst list,
exactly like MXNet's tools/im2rec.py: same arguments, byte-identical .lst files and
(with --pass-through) byte-identical .rec/.idx files."""

EPILOG = f"""\
Differences from im2rec.py: an image that cannot be read or decoded, or a .lst line that
does not parse, is reported (path and reason) and skipped instead of crashing, and the exit
status is {EXIT_SKIPPED} when anything was skipped (0 with --skip-errors); other errors exit 1.
Outputs are published atomically: a failed or interrupted run leaves no partial .rec/.idx.
Finding no matching .lst file is an error (exit 1)."""


def _add_list_options(parser):
    group = parser.add_argument_group("Options for creating image lists")
    group.add_argument("--list", action="store_true",
                       help="create image list(s) by walking ROOT and write <prefix>.lst; "
                            "otherwise read <prefix>*.lst and create <list name>.rec/.idx")
    group.add_argument("--exts", nargs="+", default=list(DEFAULT_EXTS),
                       help="accepted image extensions (lowercase, with the dot)")
    group.add_argument("--chunks", type=int, default=1, help="number of chunks")
    group.add_argument("--train-ratio", type=float, default=1.0,
                       help="ratio of images for training (1.0 writes only <prefix>.lst)")
    group.add_argument("--test-ratio", type=float, default=0,
                       help="ratio of images for testing")
    group.add_argument("--recursive", action="store_true",
                       help="walk subfolders and give each folder holding images its own label; "
                            "otherwise only images directly in ROOT, label 0")
    group.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                       help="keep the traversal order instead of im2rec's seeded shuffle")


def _add_pack_options(parser):
    group = parser.add_argument_group("Options for creating the record database")
    group.add_argument("--pass-through", action="store_true",
                       help="store the image files as they are (no decode/resize/re-encode)")
    group.add_argument("--resize", type=int, default=0,
                       help="resize the shorter edge to this size (0: keep the size)")
    group.add_argument("--center-crop", action="store_true",
                       help="crop the central square before resizing")
    group.add_argument("--quality", type=int, default=95,
                       help="JPEG quality 1-100, or PNG compression 1-9")
    group.add_argument("--num-thread", type=int, default=1,
                       help="number of worker processes for encoding (record order is kept)")
    group.add_argument("--color", type=int, default=1, choices=[-1, 0, 1],
                       help="1: color (alpha dropped), 0: grayscale, -1: unchanged")
    group.add_argument("--encoding", type=str, default=".jpg", choices=[".jpg", ".png"],
                       help="encoding of the stored images")
    group.add_argument("--pack-label", action="store_true",
                       help="store all labels of multi-label .lst lines in the record header")
    group.add_argument("--skip-errors", action="store_true",
                       help="(recpipe only) exit 0 even if bad images or list lines were skipped")


def register(subparsers):
    parser = subparsers.add_parser(
        "im2rec", help="MXNet im2rec: make .lst image lists or pack them into .rec/.idx",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("prefix", help="prefix of the input/output .lst and .rec files")
    parser.add_argument("root", help="folder holding the images")
    _add_list_options(parser)
    _add_pack_options(parser)
    parser.set_defaults(func=run)


def _run_list(args):
    result = make_lists(args.prefix, args.root, recursive=args.recursive, exts=args.exts,
                        shuffle=args.shuffle, chunks=args.chunks, train_ratio=args.train_ratio,
                        test_ratio=args.test_ratio)
    for directory, label in result.label_map:
        print(directory, label)
    return 0


class _Progress:
    """Prints im2rec's ``time: ... count: ...`` line every 1000 images, to stderr."""

    def __init__(self):
        self.last = time.monotonic()

    def __call__(self, done, total):
        if done % PROGRESS_EVERY == 0 or done == total:
            now = time.monotonic()
            print(f"time: {now - self.last:.3f}  count: {done}/{total}", file=sys.stderr)
            self.last = now


def _report_skipped(skipped):
    print(f"recpipe im2rec: skipped {len(skipped)} input(s):", file=sys.stderr)
    for skip in skipped[:SHOW_SKIPPED]:
        print(f"  {skip.path}: {skip.reason}", file=sys.stderr)
    if len(skipped) > SHOW_SKIPPED:
        print(f"  ... and {len(skipped) - SHOW_SKIPPED} more (see the log)", file=sys.stderr)


def _run_pack(args):
    options = im2rec_options(pass_through=args.pass_through, resize=args.resize,
                             center_crop=args.center_crop, quality=args.quality,
                             color=args.color, encoding=args.encoding, pack_label=args.pack_label)
    results = pack_prefix(
        args.prefix, args.root, options, num_workers=args.num_thread, progress=_Progress(),
        on_list=lambda path: print("Creating .rec file from", path, "in", os.path.dirname(path)))
    skipped = [skip for result in results for skip in result.skipped]
    for result in results:
        print(f"wrote {result.rec_path} ({result.written} records)")
    if not skipped:
        return 0
    _report_skipped(skipped)
    return 0 if args.skip_errors else EXIT_SKIPPED


def run(args):
    if args.list:
        return _run_list(args)
    return _run_pack(args)
