"""``recpipe pack SRC OUT``: pack a folder of class subfolders or an im2rec .lst into RecordIO."""

import json
import sys
import time

from .options import add_storage_options, storage_options

__all__ = ["register", "run"]

EXIT_OK = 0
EXIT_ITEMS_FAILED = 1


def register(subparsers):
    p = subparsers.add_parser(
        "pack", help="pack images into .rec/.idx (parallel, sharded, resumable)",
        description="Pack SRC (a folder of class subfolders, or an im2rec .lst) into RecordIO "
                    "files named from the prefix OUT (any fsspec URL): OUT.rec + OUT.idx + "
                    "OUT.labels.json; OUT-00000-of-0000N.rec/.idx with shards; OUT_train / "
                    "OUT_val with --val-ratio. Files appear only when complete. With --dask, "
                    "each shard is written by a task on a Dask cluster, and OUT.manifest.json "
                    "lists the shards.")
    p.add_argument("src", metavar="SRC", help="folder of class subfolders, or a .lst file")
    p.add_argument("out", metavar="OUT", help="output prefix, e.g. out/train or s3://b/train")
    add_storage_options(p)
    p.add_argument("--root", help="folder the .lst paths are relative to (default: its folder)")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes (default: usable cores; 0 for --pass-through); "
                        "with --dask local, the cluster's worker processes")
    p.add_argument("--dask", metavar="ADDRESS", default=None,
                   help="write the shards on a Dask cluster (pip install 'recpipe[dask]'): "
                        "'local' starts one of --workers processes here, else a scheduler "
                        "address such as tcp://host:8786; SRC and OUT must be reachable from "
                        "every worker. Default shards: 2 per worker thread")
    p.add_argument("--pass-through", action="store_true",
                   help="store every file's bytes as they are, whatever the format (no decode)")
    p.add_argument("--reencode", action="store_true",
                   help="decode and re-encode every image, JPEGs too (at --quality, default 95). "
                        "Default: JPEGs keep their pixels (their bytes with --restart off) "
                        "unless --resize, --center-crop, "
                        "--quality, --encoding .png or --color 0 asks for a change; other "
                        "formats, CMYK and EXIF-rotated JPEGs are always re-encoded")
    p.add_argument("--resize", type=int, default=0, metavar="S",
                   help="resize the shorter side to S pixels (im2rec semantics)")
    p.add_argument("--center-crop", action="store_true", help="keep the central square")
    p.add_argument("--quality", type=int, default=None,
                   help="JPEG quality, or PNG compression level, of re-encoded images; giving "
                        "it re-encodes every image (default 95 for what must be re-encoded)")
    p.add_argument("--encoding", choices=(".jpg", ".png"), default=None,
                   help="format of re-encoded images (default .jpg; .png re-encodes all)")
    p.add_argument("--color", type=int, choices=(-1, 0, 1), default=1,
                   help="1 color, 0 grayscale, -1 unchanged (cv2.imread flag; default 1)")
    p.add_argument("--restart", default=None, metavar="ROWS|auto|off",
                   help="restart markers in the JPEGs written, losslessly (same pixels: the "
                        "coefficients are written back, optimal Huffman tables), so that a "
                        "random crop decodes only the intervals it touches: 'auto' (intervals "
                        "of about 4 MCUs: the default), a number of MCU rows per interval, or "
                        "'off' (keep the JPEG bytes as they are). Not with --pass-through")
    p.add_argument("--pack-label", action="store_true",
                   help="store all labels of a multi-label .lst line (im2rec --pack-label)")
    p.add_argument("--exact", action="store_true",
                   help="always decode at full size (pixel-identical to im2rec; slower for "
                        "large images with a small --resize)")
    shards = p.add_mutually_exclusive_group()
    shards.add_argument("--shards", type=int, default=0, metavar="N", help="write N shards")
    shards.add_argument("--shard-size", default=None, metavar="SIZE",
                        help="cut shards at about SIZE input bytes, e.g. 256MB")
    p.add_argument("--shuffle", dest="shuffle", action="store_true", default=None,
                   help="shuffle the items (default for folders)")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                   help="keep the listed order (default for .lst files)")
    p.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    p.add_argument("--val-ratio", type=float, default=0.0, metavar="R",
                   help="put a fraction R of the items into OUT_val (rest: OUT_train)")
    p.add_argument("--on-error", choices=("skip", "raise"), default="skip",
                   help="skip and report bad images (default), or stop at the first")
    p.add_argument("--allow-outside-root", action="store_true",
                   help="pack images whose paths leave the image root (.lst lines with ../ or "
                        "absolute paths, symlinks pointing out); refused by default")
    p.add_argument("--max-file-size", default="1GB", metavar="SIZE",
                   help="refuse input files bigger than SIZE (default 1GB)")
    p.add_argument("--tolerate-errors", "--skip-errors", dest="tolerate_errors",
                   action="store_true",
                   help="exit 0 even when some images were skipped")
    p.add_argument("--no-sources", dest="sources", action="store_false",
                   help="write no OUT.sources.jsonl (by default each record's source file, "
                        "its size and SHA-256 are kept there, and errors and verify name it)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run of the same command")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


class PackProgress:
    """A tqdm bar on stderr showing images/s and input MB/s; created on the first update.

    The rate is input bytes over the time since the pack started (this object's creation),
    shown once half a second has passed: the first update, which already counts a whole
    chunk of work, does not divide it by the microseconds since that update."""

    def __init__(self, enabled, clock=time.perf_counter):
        self.enabled = enabled
        self.bar = None
        self.clock = clock
        self.started = clock()
        self.last_postfix = self.started

    def rate(self, input_bytes):
        """Input MB/s so far, or None during the first half second."""
        elapsed = self.clock() - self.started
        return input_bytes / 1e6 / elapsed if elapsed >= 0.5 else None

    def __call__(self, done, total, input_bytes):
        if not self.enabled:
            return
        if self.bar is None:
            import tqdm

            tqdm.tqdm.monitor_interval = 0  # no monitor thread
            self.bar = tqdm.tqdm(total=total, unit="img", file=sys.stderr, leave=False,
                                 dynamic_ncols=True, mininterval=0.2)
        self.bar.update(done - self.bar.n)
        now = self.clock()
        rate = self.rate(input_bytes)
        if rate is not None and now - self.last_postfix >= 0.5:
            self.last_postfix = now
            self.bar.set_postfix_str(f"{rate:.1f} MB/s", refresh=False)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _print_summary(summary, out):
    print(f"packed {summary.written} of {summary.items} images into {summary.out} "
          f"in {summary.seconds:.2f}s ({summary.images_per_second:.0f} img/s, "
          f"{summary.megabytes_per_second:.1f} MB/s in, {summary.workers} workers)", file=out)
    if summary.actions:
        print(f"  images: {_actions(summary.actions)}", file=out)
    if summary.resumed_records:
        print(f"  resumed: {summary.resumed_records} records kept from the interrupted run",
              file=out)
    for name, shards in summary.splits.items():
        records = sum(s.records for s in shards)
        size = sum(s.bytes for s in shards)
        label = "" if name == "all" else f"{name}: "
        print(f"  {label}{records} records, {size / 1e6:.1f} MB in {len(shards)} shard(s): "
              f"{shards[0].rec}{' ...' if len(shards) > 1 else ''}", file=out)
    if summary.labels_file:
        print(f"  label map: {summary.labels_file}", file=out)
    if summary.cluster:
        _print_cluster(summary, out)
    if summary.unusual:
        print("unusual inputs:", file=out)
        for reason, info in summary.unusual.items():
            print(f"  {reason}: {info['count']} ({info['meaning']}), e.g. "
                  f"{', '.join(info['examples'][:3])}", file=out)
    if summary.errors:
        print(f"errors: {len(summary.errors)} image(s) skipped:", file=out)
        for error in summary.errors[:20]:
            shard = f" (shard {error['shard']})" if error.get("shard") else ""
            print(f"  {error['path']}{shard}: {error['reason']}", file=out)
        if len(summary.errors) > 20:
            print(f"  ... and {len(summary.errors) - 20} more (see --json)", file=out)


_SHARD_LINES = 20
_ACTION_WORDS = {"kept": "kept as they were (no re-encode)",
                 "restarted": "JPEGs kept losslessly with restart markers (same pixels)",
                 "re-encoded": "JPEGs re-encoded (decoded and encoded again, lossy)",
                 "transcoded": "transcoded from other formats to the output format"}


def _actions(actions):
    """"12 kept as they were (no re-encode), 3 transcoded ..." in ACTIONS order."""
    return "; ".join(f"{count} {_ACTION_WORDS.get(action, action)}"
                     for action, count in actions.items())


def _print_cluster(summary, out):
    """The Dask run: the cluster, how the shard count was chosen, each shard, the manifest."""
    cluster = summary.cluster
    print(f"  dask: {cluster['shards']} shard task(s) on {cluster['scheduler']} "
          f"({cluster['workers']} workers, {cluster['threads']} threads)", file=out)
    if cluster.get("default_shards"):
        print(f"  no --shards/--shard-size: {cluster['shards']} shards chosen (2 per worker "
              f"thread); pass the same --shards to compare with a single-machine pack",
              file=out)
    shards = [s for split in summary.splits.values() for s in split]
    for shard in shards[:_SHARD_LINES]:
        kept = " (kept from the interrupted run)" if shard.kept else ""
        print(f"    {shard.rec.rsplit('/', 1)[-1]}: {shard.records} records, "
              f"{shard.bytes / 1e6:.1f} MB{kept}", file=out)
    if len(shards) > _SHARD_LINES:
        print(f"    ... and {len(shards) - _SHARD_LINES} more (see the manifest)", file=out)
    print(f"  manifest: {summary.manifest_file}", file=out)


def _pack(args, progress):
    from ..packing.packer import pack_dataset

    return pack_dataset(args.src, args.out, pack_options(args), progress=progress)


def pack_options(args):
    """The ``PackOptions`` of the command line (validated: a bad value raises ValueError before
    any file is touched)."""
    from ..packing.inputs import InputLimits
    from ..packing.options import PackOptions
    from ..packing.packer import parse_size

    shard_size = parse_size(args.shard_size) if args.shard_size else 0
    return PackOptions(
        root=args.root, workers=args.workers,
        pass_through=args.pass_through, resize=args.resize, center_crop=args.center_crop,
        quality=args.quality, encoding=args.encoding, color=args.color,
        pack_label=args.pack_label, exact=args.exact,
        keep_jpeg=False if args.reencode else None, shards=args.shards,
        shard_size=shard_size, shuffle=args.shuffle, seed=args.seed,
        val_ratio=args.val_ratio, on_error=args.on_error, resume=args.resume,
        dask=args.dask, storage_options=storage_options(args), sources=args.sources,
        restart=args.restart,
        limits=InputLimits(allow_outside_root=args.allow_outside_root,
                           max_file_bytes=parse_size(args.max_file_size)))


def run(args):
    from ..packing.jobs import ShardTaskError

    bar = PackProgress(not (args.no_progress or args.json) and sys.stderr.isatty())
    try:
        summary = _pack(args, bar)
    except ShardTaskError as e:  # shard tasks failed on the cluster; each is named
        print(f"recpipe pack: error: {e}", file=sys.stderr)
        return EXIT_ITEMS_FAILED
    except ImportError as e:  # --dask without the dask extra: the message says what to install
        if not args.dask:
            raise
        print(f"recpipe pack: error: {e}", file=sys.stderr)
        return EXIT_ITEMS_FAILED
    finally:
        bar.close()
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
    else:
        _print_summary(summary, sys.stdout)
    if summary.ok or args.tolerate_errors:
        return EXIT_OK
    return EXIT_ITEMS_FAILED

