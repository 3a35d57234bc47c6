"""``python -m benchmarks [SUITE ...]``: run suites under the harness and keep their results.

    python -m benchmarks --list                       # suites, their options and defaults
    python -m benchmarks faces --set threads=1,2      # one suite, an axis set
    python -m benchmarks index --set index.records=1000000 --note "reduced: 2 shared cores"
    python -m benchmarks --quick                      # every suite at smoke size (CI)

A full run writes ``benchmarks/results/<suite>/<date>-<commit>.json``; ``--quick`` runs write
to ``.bench/quick-results/`` (never rendered) unless ``--out`` says otherwise. ``--set
NAME=VALUE`` sets an option or grid axis (comma-separated values) of every selected suite that
has it, ``--set SUITE.NAME=VALUE`` of one suite. A suite that cannot run here (a server or peer
not installed) is reported as skipped; a suite that fails makes the exit status 1.
"""

import argparse
import sys
import time
import traceback
from pathlib import Path

from .harness import REPO, RESULTS, Skip, resolve_options, run_suite, write_result
from .suites import ORDER, load

QUICK_RESULTS = REPO / ".bench" / "quick-results"


def parse_sets(items, names):
    """``{suite: {option: text}}`` from ``NAME=VALUE`` / ``SUITE.NAME=VALUE`` items."""
    sets = {name: {} for name in names}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--set {item!r}: expected NAME=VALUE")
        key, value = item.split("=", 1)
        suite_name, _, option = key.rpartition(".")
        targets = [suite_name] if suite_name else names
        if suite_name and suite_name not in names:
            raise SystemExit(f"--set {item!r}: suite {suite_name!r} is not selected")
        having = [n for n in targets if option in resolve_options(load(n))]
        if not having:
            raise SystemExit(f"--set {item!r}: no selected suite has an option {option!r}")
        for name in having:
            sets[name][option] = value
    return sets


def list_suites(names):
    for name in names:
        cls = load(name)
        print(f"{name}: {cls.title}")
        defaults, quick = resolve_options(cls), resolve_options(cls, quick=True)
        for key, value in defaults.items():
            kind = "axis" if key in cls.grid else "option"
            small = f" (--quick: {_text(quick[key])})" if quick[key] != value else ""
            print(f"    {kind} {key} = {_text(value)}{small}")
        print(f"    repeats {cls.repeats}, warm-up {cls.warmup}")


def _text(value):
    return ",".join(map(str, value)) if isinstance(value, tuple) else repr(value)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="*", help=f"suites to run (default all: {' '.join(ORDER)})")
    parser.add_argument("--list", action="store_true", help="list the suites and their options")
    parser.add_argument("--quick", action="store_true",
                        help="smoke sizes, one round: checks that every suite runs (no timing "
                             "is worth reading)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                        help="an option or grid axis (comma-separated values); SUITE.NAME=VALUE "
                             "for one suite")
    parser.add_argument("--repeats", type=int, help="rounds (default: the suite's; 1 with --quick)")
    parser.add_argument("--warmup", type=int, help="untimed runs of each contender first")
    parser.add_argument("--out", type=Path, help="results folder (default benchmarks/results, "
                                                 "or .bench/quick-results with --quick)")
    parser.add_argument("--work", type=Path, help="where data and scratch go (default .bench)")
    parser.add_argument("--note", default="", help="a note kept with the results")
    parser.add_argument("--no-write", action="store_true", help="keep no result file")
    args = parser.parse_args(argv)
    names = args.suites or list(ORDER)
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        parser.error(f"unknown suite(s) {unknown}: choose from {', '.join(ORDER)}")
    if args.list:
        list_suites(names)
        return 0
    sets = parse_sets(args.sets, names)
    out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    failed, skipped = [], []
    for name in names:
        started = time.perf_counter()
        say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
        try:
            result = run_suite(load(name), quick=args.quick, sets=sets[name],
                               repeats=args.repeats, warmup=args.warmup, work=args.work,
                               note=args.note, say=say)
        except Skip as exc:
            skipped.append(name)
            print(f"{name}: skipped: {exc}", flush=True)
            continue
        except Exception:  # noqa: BLE001 - one failing suite (any error) does not stop the others
            failed.append(name)
            traceback.print_exc()
            print(f"{name}: FAILED", flush=True)
            continue
        where = "" if args.no_write else f" -> {write_result(result, out)}"
        print(f"{name}: done in {time.perf_counter() - started:.1f} s{where}", flush=True)
    print(f"{len(names) - len(failed) - len(skipped)} suite(s) ran, {len(skipped)} skipped"
          f"{' (' + ', '.join(skipped) + ')' if skipped else ''}, {len(failed)} failed"
          f"{' (' + ', '.join(failed) + ')' if failed else ''}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
