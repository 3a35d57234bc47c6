"""The results on disk: ``benchmarks/results/<suite>/<date>-<commit>.json``, one file a run.

``validate`` checks a result against the schema ``harness.run_suite`` writes; ``latest`` picks,
for each suite, its newest full run (``--quick`` smoke runs are never rendered).
"""

import json
from pathlib import Path
from typing import Any, Dict, List

from .harness import RESULTS, SCHEMA

__all__ = ["REQUIRED", "validate", "load", "result_files", "latest"]

# key -> type(s) of every result
REQUIRED = {"schema": int, "suite": str, "title": str, "command": str, "date": str,
            "commit": str, "dirty": bool, "quick": bool, "repeats": int, "warmup": int,
            "options": dict, "defaults": dict, "changed": dict, "machine": dict,
            "dataset": dict, "skipped": dict, "points": list}
MACHINE = {"cpu_model": str, "cores": int, "nproc": int}


def validate(result: Dict[str, Any], where: str = "result") -> Dict[str, Any]:
    """``result`` if it has the schema's keys and types; ValueError naming what is wrong."""
    problems = []
    for key, kind in REQUIRED.items():
        if key not in result:
            problems.append(f"no {key!r}")
        elif not isinstance(result[key], kind):
            problems.append(f"{key!r} is {type(result[key]).__name__}, not {kind.__name__}")
    if isinstance(result.get("schema"), int) and result["schema"] != SCHEMA:
        problems.append(f"schema {result['schema']} (this renderer reads {SCHEMA})")
    for key, kind in MACHINE.items():
        if isinstance(result.get("machine"), dict) and not isinstance(
                result["machine"].get(key), kind):
            problems.append(f"machine has no {kind.__name__} {key!r}")
    for n, point in enumerate(result.get("points") or []):
        if not isinstance(point, dict) or not {"params", "contenders", "ratios",
                                               "facts"} <= set(point):
            problems.append(f"point {n} lacks params/contenders/ratios/facts")
            continue
        for name, contender in point["contenders"].items():
            if not isinstance(contender.get("runs"), list) or "summary" not in contender:
                problems.append(f"point {n}: contender {name!r} lacks runs/summary")
        for ratio in point["ratios"]:
            if not {"name", "median", "spread", "per_round"} <= set(ratio):
                problems.append(f"point {n}: a ratio lacks name/median/spread/per_round")
    if problems:
        raise ValueError(f"{where}: not a benchmark result: {'; '.join(problems)}")
    return result


def load(path: Path) -> Dict[str, Any]:
    with open(path) as f:
        return validate(json.load(f), str(path))


def result_files(results: Path = RESULTS) -> Dict[str, List[Path]]:
    """``{suite: [paths]}`` of the result files under ``results``."""
    out: Dict[str, List[Path]] = {}
    for path in sorted(Path(results).glob("*/*.json")):
        out.setdefault(path.parent.name, []).append(path)
    return out


def latest(results: Path = RESULTS, quick: bool = False) -> Dict[str, Dict[str, Any]]:
    """``{suite: result}``: each suite's newest full run, by its date (``quick``: smoke runs
    count too; they are never rendered into BENCHMARKS.md)."""
    chosen: Dict[str, Dict[str, Any]] = {}
    for suite_name, paths in result_files(results).items():
        runs = [(r["date"], str(p), r) for p in paths for r in [load(p)]
                if quick or not r["quick"]]
        if not runs:
            continue
        _, path, result = max(runs, key=lambda item: (item[0], item[1]))
        if result["suite"] != suite_name:
            raise ValueError(f"{path}: holds a result of suite {result['suite']!r}")
        chosen[suite_name] = result
    return chosen
