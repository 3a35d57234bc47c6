"""Packing as whole commands (process start, imports, listing, reading, coding, writing):

- ``recpipe pack`` against MXNet's ``im2rec.py --num-thread 2`` on the same folder, re-encoding
  (``--resize 256 --quality 95``) and pass-through; im2rec runs with the mxnet venv's python from
  a ``.lst`` made beforehand (untimed); speedup = im2rec's time / recpipe's, per round;
- ``recpipe pack``'s modes: the default (JPEG pixels kept, restart markers added losslessly),
  ``--restart off`` (JPEG bytes kept, the default before restart markers), ``--reencode`` (every
  image decoded and encoded at quality 95, the first default) and ``--pass-through``.

CPU time is the command's user + system with the processes it waited for, which says more than
wall time when other jobs load the machine.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite
from .peers import mxnet_python

TARGETS = {"re-encode": 1.5, "pass-through": 3.0}
MODES = {"default (restart markers)": [], "--restart off (bytes)": ["--restart", "off"],
         "--reencode": ["--reencode"], "--pass-through": ["--pass-through"]}


def run_command(cmd, cwd):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
                           f"{proc.stderr[-2000:]}")


def count_records(idx_path):
    with open(idx_path) as f:
        return sum(1 for line in f if line.strip())


@suite
class Pack(Suite):
    name = "pack"
    title = "Packing images: recpipe pack against im2rec.py, and pack's modes"
    options = {"photos": 1000, "num_thread": 2, "workers": 0, "only": "im2rec,modes"}
    quick = {"photos": 60}
    repeats = 5
    warmup = 1  # page cache, .pyc files

    def prepare(self):
        o = self.options
        self.data = data.photos_tree(self.work.parent / "data", o["photos"])
        self.scratch = tempfile.mkdtemp(prefix="recpipe-bench-pack-")
        self.parts = {p for p in o["only"].split(",") if p}
        self.im2rec = None
        if "im2rec" in self.parts:
            python = mxnet_python()
            if python is None:
                self.skip("im2rec", "no mxnet interpreter (ci/setup_mxnet_venv.sh)")
            else:
                code = ("import mxnet, os; print(os.path.join(os.path.dirname(mxnet.__file__),"
                        " 'tools', 'im2rec.py'))")
                found = subprocess.run([python, "-c", code], capture_output=True, text=True)
                script = found.stdout.strip()
                if found.returncode != 0 or not os.path.exists(script):
                    why = script or found.stderr[-200:]
                    self.skip("im2rec", f"mxnet's tools/im2rec.py not found ({why})")
                else:
                    self.im2rec = [python, script]
                    run_command(self.im2rec + ["--list", "--recursive",
                                               os.path.join(self.scratch, "photos"), self.data],
                                self.scratch)
        files = [os.path.join(d, f) for d, _, fs in os.walk(self.data, followlinks=True)
                 for f in fs]
        size = sum(os.path.getsize(f) for f in files)
        return {"description": f"{len(files)} photos, {size / 1e6:.1f} MB (class folders)",
                "files": len(files), "bytes": size}

    def _recpipe(self, out, flags):
        cmd = [sys.executable, "-m", "recpipe", "pack", self.data, out, "--no-progress"]
        if self.options["workers"]:
            cmd += ["--workers", self.options["workers"]]
        return cmd + flags

    def contenders(self, point):
        work, found = self.scratch, {}
        if "im2rec" in self.parts:
            im = (self.im2rec or []) + ["--num-thread", self.options["num_thread"]]
            prefix = os.path.join(work, "photos")
            contests = {
                "re-encode": (self._recpipe(os.path.join(work, "rp_re"),
                                            ["--resize", "256", "--quality", "95"]),
                              im + ["--resize", "256", "--quality", "95", prefix, self.data]),
                "pass-through": (self._recpipe(os.path.join(work, "rp_pt"), ["--pass-through"]),
                                 im + ["--pass-through", prefix, self.data]),
            }
            for contest, (ours, theirs) in contests.items():
                found[f"recpipe pack, {contest}"] = lambda c=ours: run_command(c, work)
                if self.im2rec:
                    found[f"im2rec.py, {contest}"] = lambda c=theirs: run_command(c, work)
        if "modes" in self.parts:
            for mode, flags in MODES.items():
                out = os.path.join(work, "mode")

                def run(flags=flags, out=out):
                    run_command(self._recpipe(out, flags), work)
                    return {"output_mb": os.path.getsize(out + ".rec") / 1e6}
                found[f"pack {mode}"] = run
        return found

    def ratios(self, point):
        out = []
        for contest, goal in TARGETS.items():
            for metric, what in (("wall_s", "wall"), ("children_cpu_s", "CPU")):
                out.append(Ratio(f"{contest}: {what}", f"recpipe pack, {contest}",
                                 f"im2rec.py, {contest}", metric=metric, invert=True,
                                 goal=goal if metric == "wall_s" else None))
        for mode in list(MODES)[1:]:
            out.append(Ratio(f"{mode} / default", f"pack {mode}",
                             f"pack {list(MODES)[0]}", metric="wall_s"))
        return out

    def facts(self, point):
        facts = {}
        for name in ("rp_re", "rp_pt", "photos"):
            idx = os.path.join(self.scratch, name + ".idx")
            if os.path.exists(idx):
                facts[f"records {name}"] = count_records(idx)
        return facts

    def close(self):
        if getattr(self, "scratch", None):
            shutil.rmtree(self.scratch, ignore_errors=True)

    @classmethod
    def tables(cls, result):
        p = result["points"][0]
        tables = []
        rows = []
        for contest in TARGETS:
            ours, theirs = f"recpipe pack, {contest}", f"im2rec.py, {contest}"
            if theirs not in p["contenders"]:
                continue
            rows.append([contest, fmt(figure(p, ours, "wall_s"), 3),
                         fmt(figure(p, theirs, "wall_s"), 3),
                         fmt_ratio(ratio(p, f"{contest}: wall")),
                         fmt(figure(p, ours, "children_cpu_s"), 2),
                         fmt(figure(p, theirs, "children_cpu_s"), 2),
                         fmt_ratio(ratio(p, f"{contest}: CPU")), f">= {TARGETS[contest]:g}x"])
        if rows:
            tables.append(Table(
                "recpipe pack against MXNet's im2rec.py (speedup = im2rec's time / recpipe's)",
                ["contest", "recpipe wall s", "im2rec wall s", "speedup", "recpipe CPU s",
                 "im2rec CPU s", "CPU ratio", "target"], rows,
                notes=f"`im2rec.py --num-thread {result['options']['num_thread']}` from a .lst "
                      "made beforehand; re-encode = `--resize 256 --quality 95`.",
                chart="speedup", chart_title="recpipe pack against im2rec.py (x faster)",
                headline=True))
        modes = [name[len("pack "):] for name in p["contenders"] if name.startswith("pack ")]
        if modes:
            rows = [[m, fmt(figure(p, f"pack {m}", "wall_s"), 2),
                     fmt(figure(p, f"pack {m}", "children_cpu_s"), 2),
                     fmt(figure(p, f"pack {m}", "output_mb"), 1),
                     "1.00x" if m == modes[0] else fmt_ratio(ratio(p, f"{m} / default"))]
                    for m in modes]
            tables.append(Table("recpipe pack's modes (whole commands)",
                                ["mode", "wall s", "CPU s", "output MB", "wall / default"],
                                rows, chart="wall s",
                                chart_title="recpipe pack, wall seconds (lower is better)",
                                headline=True))
        return tables
