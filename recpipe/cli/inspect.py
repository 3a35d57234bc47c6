"""``recpipe inspect`` and ``verify``: look at and check a ``.rec`` (``index``: cli/index.py)."""

import json
import sys

from ..io.health.protection import describe, protection_of
from ..io.sidecars.quarantine import quarantine_of
from ..io.format.sniff import check_recordio_head
from ..io.sources import open_source
from ..io.health.contents import inspect
from ..io.sidecars.record_sources import sources_at
from ..io.health.verify import PROBLEM_KINDS, verify
from .dask_options import WholeFileJob, add_dask_options
from .options import add_storage_options, storage_options
from .progress import byte_progress

__all__ = ["register", "run_inspect", "run_verify"]


def register(subparsers):
    p = subparsers.add_parser("inspect", help="summarise a .rec: records, labels, image formats",
                              description="Summarise a RecordIO file: record count and sizes, "
                                          "IRHeader ids and labels, and the format and size of "
                                          "a seeded sample of its images.")
    p.add_argument("file", help=".rec file (path or fsspec URL)")
    p.add_argument("--sample", type=int, default=64, metavar="N",
                   help="images to sniff for format and size (default 64)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_storage_options(p)
    p.set_defaults(func=run_inspect)

    p = subparsers.add_parser("verify", help="check every record and the .idx; exit 1 on problems",
                              description="Check every record of a RecordIO file (resuming after "
                                          "bad ones), the .idx beside it, and optionally decode "
                                          "every image. Exit status 0 when clean, 1 otherwise.")
    p.add_argument("file", help=".rec file (path or fsspec URL)")
    p.add_argument("--index", metavar="IDX", help=".idx to check (default: the one beside FILE)")
    p.add_argument("--no-index", action="store_true", help="do not check any .idx")
    p.add_argument("--decode", action="store_true",
                   help="also decode every image, as the loaders do (libjpeg's warnings are "
                        "errors): finds truncated or structurally broken images, not most bit "
                        "flips inside JPEG data, which still decode; only checksums see those")
    p.add_argument("--no-sums", action="store_true",
                   help="do not check the records against the .sums sidecar")
    p.add_argument("--write-sums", action="store_true",
                   help="with --decode: write the .sums sidecar (atomically) when every record "
                        "read and decoded, so loaders check them from then on")
    p.add_argument("--accept-current-bytes", action="store_true",
                   help="with --write-sums: certify records even where the existing .sums "
                        "sidecar says they are damaged (their bytes as they are now; each "
                        "is listed); without it such records are refused")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_storage_options(p)
    add_dask_options(p, "check the records")
    p.set_defaults(func=run_verify)


def run_inspect(args):
    with open_source(args.file, storage_options(args)) as source:
        check_recordio_head(source)  # an image, .idx or .lst: say so before any summary
    with byte_progress(not args.no_progress, "inspect") as progress:
        summary = inspect(args.file, sample=args.sample, seed=args.seed, progress=progress,
                          storage_options=storage_options(args))
    quarantine = quarantine_of(args.file, storage_options(args))
    _add_class_names(summary, args.file, storage_options(args))
    summary["quarantined"] = [e._asdict() for e in sorted(quarantine.entries().values())]
    sources = sources_at(args.file, [e["offset"] for e in summary["quarantined"]],
                         storage_options(args), summary["bytes"])
    for entry in summary["quarantined"]:  # the file each quarantined record was packed from
        if entry["offset"] in sources:
            entry["source"] = sources[entry["offset"]].describe()
    summary["protection"] = protection_of(args.file, storage_options(args))
    if summary["records"] == 0 and summary["bad_ranges"]:
        print(f"recpipe inspect: error: {args.file} is not a RecordIO file (no readable record "
              "in it)", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)
    return 0


def _add_class_names(summary, url, options):
    """``labels.class_names`` (label text -> class name) and ``labels.label_map`` (its file)
    from the label map ``recpipe pack`` wrote beside the file; None when there is none."""
    from ..report.label_map import class_names

    found = class_names(url, options)
    summary["labels"]["label_map"] = found[0] if found else None
    summary["labels"]["class_names"] = found[1] if found else None


def _tally(counts, unit=""):
    """``{"jpeg": 60, "png": 4}`` as ``jpeg 60, png 4`` (``unit`` after each key)."""
    return ", ".join(f"{key}{unit}: {n}" for key, n in counts.items()) or "none"


def _print_labels(labels):
    packed = ""
    if labels["packed"]:
        widths = {w: n for w, n in labels["widths"].items() if w != "0"}
        packed = f" (label widths {_tally(widths)})"
    print(f"  labels: {labels['scalar']} scalar (flag 0), {labels['packed']} packed{packed}; "
          f"{labels['distinct']} distinct values")
    if not labels["histogram"]:
        return
    names = labels.get("class_names") or {}
    shown = ", ".join(f"{k} {names[k]}: {n}" if k in names else f"{k}: {n}"
                      for k, n in labels["histogram"].items())
    more = " ..." if labels["histogram_truncated"] else ""
    layout = labels.get("layout_records")
    among = (f" of the image records (the header record and {layout['identities']} identity "
             "records left out)" if layout else "")
    source = f", class names from {labels['label_map']}" if names else ""
    print(f"  {labels['histogram_of']} histogram{among}{source}: {shown}{more}")


def _print_summary(s):
    payload = s["payload_bytes"]
    print(f"{s['url']}: {s['records']} records, {s['bytes']} bytes")
    if "protection" in s:
        print(f"  checksums: {describe(s['protection'])}")
    if payload["min"] is not None:
        print(f"  payload bytes: min {payload['min']}, mean {payload['mean']}, "
              f"max {payload['max']}")
    if s["bad_ranges"]:
        print(f"  UNREADABLE: {s['bad_ranges']} byte ranges, {s['skipped_bytes']} bytes skipped "
              "(run `recpipe verify` for details)")
    h = s["headers"]
    ids = (f"; ids {h['id_min']}..{h['id_max']}, {'unique' if h['ids_unique'] else 'NOT unique'}"
           if h["with_header"] else "")
    print(f"  IRHeader: {h['with_header']} records with one, {h['without_header']} without{ids}")
    labels = s["labels"]
    _print_labels(labels)
    for note in labels["notes"]:
        print(f"  note: {note}")
    if s.get("sources"):
        print(f"  sources: {s['sources']['records']} records packed from "
              f"{s['sources']['root']} ({s['sources']['file']}: each record's file, size, SHA-256)")
    _print_quarantined(s["quarantined"])
    layout = s.get("layout", {})
    if layout.get("kind") == "insightface":
        print(f"  layout: InsightFace (header record at key 0; images = keys "
              f"{layout['image_keys'][0]}..{layout['image_keys'][1] - 1}, {layout['identities']} "
              f"identity records = keys {layout['identity_keys'][0]}.."
              f"{layout['identity_keys'][1] - 1}); loaders serve the {layout['images']} images")
    im = s["images"]
    if im["sampled"]:
        print(f"  images (sample of {im['sampled']}, seed {im['seed']}): formats "
              f"{_tally(im['formats'])}")
        w, h = im["width"], im["height"]
        if w["min"] is not None:
            print(f"    width {w['min']}..{w['max']} (mean {w['mean']}), "
                  f"height {h['min']}..{h['max']} (mean {h['mean']}), "
                  f"{_tally(im['channels'], ' channels')}")
        print(f"    progressive {im['progressive']}, cmyk {im['cmyk']}, "
              f"grayscale {im['grayscale']}, exif-rotated {im['exif_rotated'] or 0}, "
              f"restart markers {im.get('restart_markers', 0)}")


def _print_quarantined(entries, limit=20):
    if not entries:
        return
    print(f"  QUARANTINED by a loader: {len(entries)} record(s) (`recpipe verify --decode` "
          "re-checks them)")
    for e in entries[:limit]:
        print(f"    record {e['record']} at byte {e['offset']}: {e['kind']}: {e['reason']}")
        if e.get("source"):
            print(f"      packed from {e['source']}")
    if len(entries) > limit:
        print(f"    ... {len(entries) - limit} more")


def _default_decoder():
    """The loaders' default decoder (strict, whole image, the ``max_pixels`` limit): what
    ``recpipe verify --decode`` checks every image with."""
    from ..decode.decoders import get_decoder

    return get_decoder("auto")


def run_verify(args):
    index_url = False if args.no_index else args.index
    if args.write_sums and not args.decode:
        print("recpipe verify: error: --write-sums needs --decode", file=sys.stderr)
        return 2
    if args.accept_current_bytes and not args.write_sums:
        print("recpipe verify: error: --accept-current-bytes needs --write-sums", file=sys.stderr)
        return 2
    job = WholeFileJob(args)  # --dask: the same checks in chunk tasks on a cluster
    with byte_progress(not args.no_progress, "verify") as progress:
        report = job.call(verify, "verify_on_cluster", args.file, index_url,
                          decoder=_default_decoder() if args.decode else None,
                          progress=progress,
                          storage_options=storage_options(args), sums=not args.no_sums,
                          write_sums=args.write_sums,
                          accept_current_bytes=args.accept_current_bytes)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _print_report(report)
        if args.write_sums and not report.sums_written and report.counts.get("checksum-mismatch"):
            print("  not writing checksums: the .sums sidecar says these records are damaged; "
                  "restore them from their source, or, if their bytes are right as they are "
                  "now, pass --accept-current-bytes with --write-sums")
    job.print_run(to_stderr=args.json)
    return 0 if report.ok else 1


def _print_report(report):
    index = report.index_url or "no index"
    print(f"{report.url}: {report.records} readable records, {report.size} bytes ({index})")
    if report.decoded is not None:
        print(f"  decoded {report.decoded} images, {report.decode_failures} failed")
    print(f"  checked: {report.checked}")
    if report.sums_written:
        print(f"  wrote {report.sums_written}: loaders check every record from now on")
        if report.sums_replaced:
            print(f"  (it replaces a sidecar that did not count: {report.sums_replaced})")
    for p in report.accepted:
        print(f"  ACCEPTED {p.kind} at byte {p.offset}, record {p.record}: its current bytes "
              f"are certified (--accept-current-bytes); the old sidecar said: {p.reason}")
    if report.quarantine_cleared:
        print(f"  cleared {report.quarantine_cleared} quarantine entries (their records passed)")
    for p in report.problems:
        where = f"byte {p.offset}" if p.offset is not None else "-"
        if p.end is not None:
            where += f"..{p.end}"
        record = f"record {p.record}" if p.record is not None else ""
        print(f"  {p.kind:24} {where:>24} {record:>14}  {p.reason}")
        if p.offset in report.sources:
            print(f"  {'':24} {'':>24} {'':>14}  packed from {report.sources[p.offset].describe()}")
    for kind, count in sorted(report.counts.items()):
        listed = sum(1 for p in report.problems if p.kind == kind)
        if listed < count:
            print(f"  ... {count - listed} more {kind} ({PROBLEM_KINDS[kind]})")
    if report.ok:
        print("  OK")
    else:
        total = sum(report.counts.values())
        print(f"  {total} problem(s); {report.skipped_bytes} bytes unreadable")
