"""The one harness every suite runs under.

A suite (``benchmarks/suites/<topic>.py``) is a ``Suite`` subclass registered with ``@suite``:
its options (a parameter ``grid`` of axes, scalar ``options``, smaller ``quick`` values), an
untimed ``prepare`` (data, servers), its ``contenders`` at each grid point (callables: one call
is one run), the ``ratios`` that compare them, ``facts`` measured once, and ``tables`` that
render a result. ``run_suite`` does the rest, the same way for every suite:

- every point of the grid, in order; at each point the contenders are built (untimed), each
  run ``warmup`` times untimed, then ``repeats`` rounds, the contenders of a round in rotating
  order (``recpipe.decode.timing.rotated``, as ``recpipe bench`` interleaves its runs), so that
  the drift of a shared machine hits every contender alike;
- every run is timed here (wall seconds, ``recpipe.decode.cpu_meter.CpuMeter``: the CPU this
  process got, the run-queue wait, load and CPU pressure; CPU seconds of reaped children), and
  a contender may return its own figures too (``images_per_s`` over its timed window after its
  own warm-up, for example);
- each figure is the median of its runs with their spread, each ratio the median of the rounds'
  paired ratios (``recpipe.decode.timing``), never absolute times compared across runs;
- the result records the machine (CPU model, cores, the load seen, ``busy`` when other
  processes took the cores), the data, the options (and which differ from the defaults), the
  git commit and the date, and is written as JSON to
  ``benchmarks/results/<suite>/<date>-<commit>.json``.

A contender that cannot run here (a peer that is not installed, no compiler) raises ``Skip``
with the reason, which the result keeps; any other error fails the suite.
"""

import dataclasses
import datetime
import itertools
import json
import os
import platform
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from recpipe.decode.cpu_meter import CpuMeter, CpuShare
from recpipe.decode.timing import (cpu_model, machine_record, median_spread, paired_ratios,
                                   rotated)
from recpipe.system.host import node_share

__all__ = ["SCHEMA", "REPO", "RESULTS", "Skip", "Ratio", "Table", "Suite", "suite", "SUITES",
           "resolve_options", "grid_points", "run_suite", "write_result", "git_commit",
           "machine_facts", "parse_value"]

SCHEMA = 1
REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
SUITES: Dict[str, type] = {}


class Skip(Exception):
    """A contender (or a whole suite) that cannot run here; the message says why."""


@dataclass(frozen=True)
class Ratio:
    """``numerator``'s ``metric`` over ``denominator``'s, paired round by round (``invert``: the
    denominator's over the numerator's, a speedup of times). ``goal``: the target, shown beside
    the figure (never asserted)."""

    name: str
    numerator: str
    denominator: str
    metric: str = "images_per_s"
    invert: bool = False
    goal: Optional[float] = None


@dataclass
class Table:
    """One question answered from a result: ``columns`` and ``rows`` (strings or numbers),
    ``notes`` (Markdown under the title), ``chart`` (the column a docs chart draws), and
    ``headline`` (shown on the docs' benchmark page too)."""

    question: str
    columns: List[str]
    rows: List[List[Any]]
    notes: str = ""
    chart: Optional[str] = None
    chart_title: Optional[str] = None
    headline: bool = False


def suite(cls):
    """Register a ``Suite`` subclass under its ``name``."""
    if not cls.name or cls.name in SUITES and SUITES[cls.name] is not cls:
        raise ValueError(f"suite {cls.__name__}: its name {cls.name!r} is empty or taken")
    SUITES[cls.name] = cls
    return cls


class Suite:
    """A topic's benchmarks. Subclasses set the class attributes and override the methods."""

    name = ""
    title = ""                      # the question the suite answers, in a line
    grid: Dict[str, tuple] = {}     # axis -> values: every combination is a point
    options: Dict[str, Any] = {}    # scalar options -> defaults
    quick: Dict[str, Any] = {}      # --quick: smaller values of axes and options
    repeats = 3
    warmup = 1
    threads_option = "threads"      # the axis or option naming decode threads (machine record)

    def __init__(self, options: Dict[str, Any], work: Path, say: Callable[[str], None] = print):
        self.options = options
        self.work = work
        self.say = say
        self.skipped: Dict[str, str] = {}

    # -- what a suite provides ---------------------------------------------------------------
    def prepare(self) -> Dict[str, Any]:
        """Untimed: make the data, start servers. Returns the dataset's description."""
        return {}

    def contenders(self, point: Dict[str, Any]) -> Dict[str, Callable[[], Optional[dict]]]:
        """The contenders at ``point``: name -> a callable doing one run; it may return a dict
        of its own figures (numbers are summarised, anything else is kept with the run)."""
        raise NotImplementedError

    def ratios(self, point: Dict[str, Any]) -> List[Ratio]:
        return []

    def facts(self, point: Dict[str, Any]) -> Dict[str, Any]:
        """Measured once at ``point`` after its rounds (sizes, single costs, checks)."""
        return {}

    def close(self) -> None:
        """Stop what ``prepare`` started."""

    def skip(self, contender: str, reason: str) -> None:
        """Leave ``contender`` out of this run, saying why (kept in the result)."""
        self.skipped[contender] = reason
        self.say(f"{self.name}: {contender} skipped: {reason}")

    @classmethod
    def tables(cls, result: Dict[str, Any]) -> List[Table]:
        """The tables this suite's ``result`` answers (pure: reads the JSON only)."""
        return []


# -- options -----------------------------------------------------------------------------------

def parse_value(text: str, default: Any) -> Any:
    """``text`` as the type of ``default`` (a tuple axis: comma-separated values)."""
    if isinstance(default, tuple):
        sample = default[0] if default else ""
        return tuple(parse_value(part, sample) for part in text.split(",") if part != "")
    if isinstance(default, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{text!r} is not a boolean")
    if isinstance(default, int):
        return int(text.replace("_", ""))
    if isinstance(default, float):
        return float(text)
    return text


def resolve_options(cls, quick: bool = False, sets: Optional[Dict[str, str]] = None) -> Dict:
    """The suite's axes and options: defaults, then ``quick`` values, then ``sets`` (text)."""
    values: Dict[str, Any] = {**{k: tuple(v) for k, v in cls.grid.items()}, **cls.options}
    if quick:
        unknown = sorted(set(cls.quick) - set(values))
        if unknown:
            raise ValueError(f"suite {cls.name}: quick values for unknown options {unknown}")
        values.update({k: tuple(v) if k in cls.grid else v for k, v in cls.quick.items()})
    for key, text in (sets or {}).items():
        if key not in values:
            raise ValueError(f"suite {cls.name} has no option {key!r}; it has "
                             f"{', '.join(sorted(values))}")
        values[key] = parse_value(text, values[key])
    return values


def grid_points(cls, options: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every combination of the grid's axes (one empty point without axes)."""
    axes = list(cls.grid)
    return [dict(zip(axes, combo)) for combo in itertools.product(*(options[a] for a in axes))]


# -- the record ---------------------------------------------------------------------------------

def git_commit(repo: Path = REPO) -> Dict[str, Any]:
    """``{"commit", "dirty"}`` of the checkout (commit "unknown" outside git); ``dirty``: tracked
    files differ from the commit (results aside)."""
    def git(*args):
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              timeout=30)
        return done.stdout.strip() if done.returncode == 0 else None

    try:
        commit = git("rev-parse", "--short=10", "HEAD")
        status = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                     ":(exclude)benchmarks/results")
    except (OSError, subprocess.SubprocessError):
        commit = status = None
    return {"commit": commit or "unknown", "dirty": bool(status)}


def machine_facts() -> Dict[str, Any]:
    cores, source = node_share()
    return {"cpu_model": cpu_model(), "nproc": os.cpu_count(), "cores": cores,
            "cores_source": source, "platform": platform.platform(),
            "python": platform.python_version(), "load_average_start": _loadavg()}


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(function, cores):
    meter, children = CpuMeter(cores), _children_cpu()
    start = time.perf_counter()
    out = function()
    wall = time.perf_counter() - start
    children = _children_cpu() - children
    # the CPU of the run's own processes: this one's and its children's (commands, runners)
    share = meter.read()
    share = dataclasses.replace(share, cpu_seconds=share.cpu_seconds + children)
    run = {"wall_s": wall, "cpu": share.to_dict(), "children_cpu_s": children}
    if out:
        run.update(out)
    return run, share


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def summarise_runs(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Median and spread of every number the runs share (``cpu``'s too, as ``cpu.KEY``)."""
    flat = [{**{k: v for k, v in run.items() if k != "cpu"},
             **{f"cpu.{k}": v for k, v in run.get("cpu", {}).items()}} for run in runs]
    keys = [k for k in flat[0] if all(_is_number(f.get(k)) or f.get(k) is None for f in flat)
            and any(_is_number(f.get(k)) for f in flat)] if flat else []
    summary = {}
    for key in keys:
        figure = median_spread(f.get(key) for f in flat)
        summary[key] = {"median": figure["median"], "spread": figure["spread"]}
    return summary


def _ratio(ratio: Ratio, runs: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Any]:
    numerators = [r.get(ratio.metric) for r in runs.get(ratio.numerator, [])]
    denominators = [r.get(ratio.metric) for r in runs.get(ratio.denominator, [])]
    if ratio.invert:
        numerators, denominators = denominators, numerators
    per_round = paired_ratios(numerators, denominators)
    figure = median_spread(per_round)
    return {"name": ratio.name, "numerator": ratio.numerator, "denominator": ratio.denominator,
            "metric": ratio.metric, "invert": ratio.invert, "goal": ratio.goal,
            "median": figure["median"], "spread": figure["spread"], "per_round": per_round}


def run_suite(cls, *, quick: bool = False, sets: Optional[Dict[str, str]] = None,
              repeats: Optional[int] = None, warmup: Optional[int] = None,
              work: Optional[Path] = None, note: str = "",
              say: Callable[[str], None] = print) -> Dict[str, Any]:
    """Run suite ``cls`` and return its result (a JSON-ready dict; ``write_result`` saves it)."""
    options = resolve_options(cls, quick, sets)
    repeats = (1 if quick else cls.repeats) if repeats is None else repeats
    warmup = (min(cls.warmup, 1) if quick else cls.warmup) if warmup is None else warmup
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats={repeats} must be >= 1 and warmup={warmup} >= 0")
    work = Path(work or REPO / ".bench") / cls.name
    work.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    commit = git_commit()  # what is measured: the checkout as the run starts
    machine = machine_facts()
    cores = machine["cores"]
    instance = cls(options, work, say)
    shares: List[CpuShare] = []
    points_out = []
    try:
        dataset = instance.prepare()
        points = grid_points(cls, options)
        built = []
        for point in points:
            contenders = dict(instance.contenders(point))
            for name, function in list(contenders.items()):
                try:
                    for _ in range(warmup):
                        function()
                except Skip as exc:
                    instance.skipped[name] = str(exc)
                    del contenders[name]
            built.append((point, contenders))
        runs = [{name: [] for name in contenders} for _, contenders in built]
        for round_index in range(repeats):
            for (point, contenders), point_runs in zip(built, runs):
                for name in rotated(list(contenders), round_index):
                    if name in instance.skipped:
                        continue
                    try:
                        run, share = _timed(contenders[name], cores)
                    except Skip as exc:
                        instance.skipped[name] = str(exc)
                        continue
                    shares.append(share)
                    run["round"] = round_index
                    point_runs[name].append(run)
                    say(f"{cls.name} {_label(point)} round {round_index + 1}/{repeats} "
                        f"{name}: {_brief(run)}")
        for (point, _contenders), point_runs in zip(built, runs):
            point_runs = {n: r for n, r in point_runs.items() if n not in instance.skipped}
            points_out.append({
                "params": point,
                "contenders": {name: {"runs": r, "summary": summarise_runs(r) if r else {}}
                               for name, r in point_runs.items()},
                "ratios": [_ratio(ratio, point_runs) for ratio in instance.ratios(point)
                           if ratio.numerator in point_runs and ratio.denominator in point_runs],
                "facts": instance.facts(point),
            })
    finally:
        instance.close()
    threads = max([v for v in _values(options, cls.threads_option) if isinstance(v, int)]
                  or [cores])
    machine.update(machine_record(shares, threads, cores, machine["cores_source"]))
    machine["load_average_end"] = _loadavg()
    defaults = resolve_options(cls)
    changed = {k: v for k, v in options.items() if v != defaults[k]}
    return {
        "schema": SCHEMA, "suite": cls.name, "title": cls.title,
        "command": command_line(cls.name, quick, sets, repeats if repeats != (
            1 if quick else cls.repeats) else None),
        "date": started.isoformat(timespec="seconds"),
        "seconds": round((datetime.datetime.now(datetime.timezone.utc) - started)
                         .total_seconds(), 1),
        **commit, "quick": quick, "note": note,
        "repeats": repeats, "warmup": warmup,
        "options": _jsonable(options), "defaults": _jsonable(defaults),
        "changed": _jsonable(changed), "machine": machine, "dataset": dataset,
        "skipped": instance.skipped, "points": points_out,
    }


def _values(options, key):
    value = options.get(key)
    return value if isinstance(value, tuple) else (value,)


def _jsonable(options):
    return {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}


def _label(point):
    return ",".join(f"{k}={v}" for k, v in point.items()) or "-"


def _brief(run):
    for key in ("images_per_s", "seconds", "mib_per_s"):
        if _is_number(run.get(key)):
            return f"{key} {run[key]:.4g} (wall {run['wall_s']:.2f} s)"
    return f"wall {run['wall_s']:.3f} s"


def command_line(name, quick=False, sets=None, repeats=None):
    """The command that reproduces a run."""
    parts = ["python -m benchmarks", name]
    if quick:
        parts.append("--quick")
    if repeats is not None:
        parts.append(f"--repeats {repeats}")
    parts += [f"--set {k}={v}" for k, v in (sets or {}).items()]
    return " ".join(parts)


def write_result(result: Dict[str, Any], results: Path = RESULTS) -> Path:
    """Save ``result`` as ``results/<suite>/<date>-<commit>.json`` (a ``-N`` suffix when that
    name is taken: every run is kept), written whole or not at all."""
    folder = Path(results) / result["suite"]
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{result['date'][:10]}-{result['commit']}"
    path, n = folder / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)
    return path
