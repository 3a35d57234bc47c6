"""``recpipe doctor``: which fast paths this installation has, and how to get the missing ones."""

import json

from ..io.health.protection import describe
from ..report.doctor import diagnose

__all__ = ["register", "run"]


def register(subparsers):
    p = subparsers.add_parser("doctor", help="check decoders, C extensions, protocols and cores",
                              description="Report the live decoders, the C extensions built, "
                                          "libjpeg-turbo, importable fsspec protocols, usable "
                                          "cores and versions, with the cost of each missing "
                                          "fast path measured on a built-in sample.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-measure", action="store_true", help="skip the timed decode (faster)")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help=".rec files: also say whether each is protected by checksums")
    p.set_defaults(func=run)


def run(args):
    report = diagnose(measure=not args.no_measure, files=args.files)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"recpipe {report['recpipe']} on Python {report['python']} ({report['platform']})")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items() if v))
    print(f"decoders: {', '.join(report['decoders']['live'])} (auto: {report['decoders']['auto']})")
    print(f"build: {report['build']}")
    for info in report["fast_paths"].values():
        mark = "ok " if info["present"] else "MISSING"
        print(f"  [{mark:7}] {info['what']}")
        if not info["present"]:
            print(f"            install: {info['install']}")
    clients = report.get("protocol_clients", {})
    print("protocols: " + ", ".join(f"{k} ({clients[k]})" if k in clients else k
                                    for k in report["protocols"]))
    c = report["cores"]
    print(f"cores: {c['usable']} usable ({c['source']}); this rank: {c['this_rank']} "
          f"(local rank {c['local_rank']} of {c['local_ranks']})")
    if report["environment"]:
        print("environment: " + ", ".join(f"{k}={v}" for k, v in report["environment"].items()))
    for name, value in report.get("set_by_recpipe", {}).items():
        print(f"default: {name}={value}, set by recpipe (not by you) before loading OpenCV: its "
              "pixel limit for non-JPEG images; set it yourself to change it")
    for url, protection in report.get("protection", {}).items():
        print(f"{url}: checksums: {describe(protection)}")
    if "decode_images_per_s" in report:
        auto = report["decoders"]["auto"]
        print("decode, one thread, built-in sample: " + ", ".join(
            f"{k}{' (auto)' if k == auto else ''} {v:.0f} img/s"
            for k, v in report["decode_images_per_s"].items()))
        for name, cost in report["missing_cost"].items():
            print(f"  cost of {name}: {cost}")
    return 0
