"""``recpipe plan FILE --gpus 8 --gpu-rate 3000``: the cores (and threads per rank) that keep the
GPUs fed, from a short measurement of the file with the recipe."""

import json
import sys

from .options import add_storage_options, storage_options

__all__ = ["register", "run"]


def register(subparsers):
    p = subparsers.add_parser(
        "plan", help="predict the cores and threads per rank that keep the GPUs fed",
        description="Decode a short sample of FILE with a recipe on one thread (CPU and GIL-held "
                    "time per image, bytes per image, storage read rate), then predict the "
                    "images/s per core count with RANKS processes per node (Amdahl-style: "
                    "parallel work over the cores, the GIL-held part serial per process, storage "
                    "a cap) and say how many cores meet GPUS x GPU_RATE images/s.")
    p.add_argument("file", help=".rec file (any fsspec URL)")
    add_storage_options(p)
    p.add_argument("--gpus", type=int, required=True, help="GPUs per node")
    p.add_argument("--gpu-rate", type=float, required=True,
                   help="images/s one GPU consumes (its training step rate x batch size)")
    p.add_argument("--ranks", type=int, default=None,
                   help="processes per node (default: one per GPU)")
    p.add_argument("--config", default="train",
                   help="recipe: train, val or faces, as in bench (default: train)")
    p.add_argument("--images", type=int, default=256, help="images to measure (default 256)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="samples per batch in the measured sample (default: 32)")
    p.add_argument("--dtype", default="uint8", choices=["uint8", "float32", "float16"],
                   help="output element type of the recipe (default: uint8)")
    p.add_argument("--storage-mbps", type=float, default=None,
                   help="the storage read rate in MB/s (default: measured on a sample of "
                        "records; a cached local file reads far faster than a cold one)")
    p.add_argument("--json", action="store_true", help="print the advice as JSON")
    p.set_defaults(func=run)


def run(args):
    from dataclasses import replace

    from ..decode.bench import CONFIGS
    from ..capacity import advise_cores, measure_workload

    if args.config not in CONFIGS:
        raise ValueError(f"--config {args.config!r}: choose from {', '.join(CONFIGS)}")
    workload = measure_workload(args.file, CONFIGS[args.config], images=args.images,
                                batch_size=args.batch_size, dtype=args.dtype,
                                storage_options=storage_options(args))
    if args.storage_mbps is not None:
        workload = replace(workload, storage_bytes_per_s=args.storage_mbps * 1e6,
                           storage_source="given")
    report = advise_cores(workload, args.gpus, args.gpu_rate, args.ranks)
    report.update(file=args.file, config=args.config)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    _print_report(report, sys.stdout)
    return 0


_SOURCES = {
    "page cache": " (read from the page cache: the file is in memory here; not the disk's rate)",
    "disk": " (read from the disk: none of it was cached)",
    "disk and page cache": " (read partly from the page cache: between the disk's and memory's)",
    "local, cache unknown": " (a local file, cached or not: not told here)",
    "remote": " (read over the network)",
    "given": " (given with --storage-mbps)",
}


def _source(workload):
    return _SOURCES.get(workload.get("storage_source"), "")


def _print_report(report, out):
    w = report["workload"]
    storage = w["storage_bytes_per_s"]
    print(f"{report['file']} ({report['config']}): {w['cpu_seconds'] * 1e3:.2f} ms CPU per image, "
          f"{w['gil_seconds'] * 1e6:.0f} us of it holding the GIL, "
          f"{w['bytes_per_image'] / 1e3:.1f} kB read per image"
          + (f", storage {storage / 1e6:.0f} MB/s{_source(w)}" if storage else ""), file=out)
    print(f"demand: {report['gpus']} GPUs x {report['gpu_rate']:g} img/s = "
          f"{report['demand_images_per_s']:g} img/s, {report['ranks']} rank(s) per node", file=out)
    print(f"{'cores':>6} {'threads/rank':>12} {'img/s':>10}  limit", file=out)
    for row in report["table"]:
        meets = row["images_per_s"] >= report["demand_images_per_s"]
        mark = " <- meets the demand" if meets else ""
        print(f"{row['cores']:>6g} {row['threads_per_rank']:>12} {row['images_per_s']:>10.0f}  "
              f"{row['limit']}{mark}", file=out)
    print("ranks per node: " + ", ".join(
        f"{row['ranks']}: " + (f"{row['cores_needed']} cores ({row['threads_per_rank']} threads "
                               "each)" if row["cores_needed"] else "capped below the demand")
        for row in report["by_ranks"]), file=out)
    for sentence in report["advice"]:
        print(f"- {sentence}", file=out)
