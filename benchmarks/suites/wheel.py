"""The manylinux wheel (libjpeg-turbo vendored) against the editable checkout: same speed?

Installs the wheel (``ci/build_wheel.sh`` builds one into .bench/wheel unless ``wheel`` names
one) into a fresh venv beside this Python's site-packages (recpipe itself only from the wheel),
builds the checkout's C extensions in place, then runs ``recpipe demo --json`` from each,
alternated. Reported: the wheel's size, each configuration's images/s, the wheel/editable ratio
paired by round, CPU time per decoded image (robust to other jobs on shared cores), and which
files each side loaded (so a side that silently fell back to Python shows). ``--quick`` builds
nothing: without a ``wheel`` it times the editable checkout alone.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile

from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import REPO, Ratio, Suite, Table, suite

NATIVE = ("_batch", "_kernels", "_resize", "_colour", "_crc32c", "_plan")
_WHICH = ("import importlib.util, json, recpipe\nfiles = {'recpipe': recpipe.__file__}\n"
          "for n in %r:\n"
          "    spec = importlib.util.find_spec('recpipe.' + n)\n"
          "    if spec is not None:\n"
          "        files[n] = __import__('recpipe.' + n, fromlist=['_']).__file__\n"
          "print(json.dumps(files))\n" % (NATIVE,))
CONFIGS = ("train", "val", "bare decode")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def build_wheel():
    out = REPO / ".bench" / "wheel"
    subprocess.run(["bash", str(REPO / "ci" / "build_wheel.sh"), str(out), sys.executable],
                   check=True, stdout=subprocess.DEVNULL, env=clean_env())
    tag = "cp%d%d" % sys.version_info[:2]
    return next(str(out / f) for f in sorted(os.listdir(out))
                if f.endswith(".whl") and f"-{tag}-" in f)


def wheel_venv(wheel, folder):
    python = os.path.join(folder, "bin", "python")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    folder], check=True, env=clean_env())
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                    "--disable-pip-version-check", "--no-deps", "--no-index", wheel],
                   check=True, env=clean_env())
    return python


def loaded_files(argv, env, cwd):
    run = subprocess.run(argv + ["-c", _WHICH], capture_output=True, text=True, check=True,
                         env=env, cwd=cwd)
    return json.loads(run.stdout)


def demo(argv, env, cwd, seconds, threads):
    """{config: images/s} of one ``recpipe demo`` run, plus ``cpu_us_per_image``: the run's CPU
    time (all of it: sample, pack, imports, measuring) over the images it decoded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(argv + ["-m", "recpipe", "demo", "--json", "--seconds", str(seconds),
                                 "--threads", str(threads)],
                         capture_output=True, text=True, env=env, cwd=cwd)
    if run.returncode != 0:
        raise RuntimeError(f"recpipe demo failed: {run.stderr[-2000:]}")
    if "running without" in run.stderr:
        raise RuntimeError(f"{argv[0]} ran on a slow path: {run.stderr}")
    results = json.loads(run.stdout)
    rates = {name: config["images_per_s"] for name, config in results["configs"].items()}
    rates["bare decode"] = results["bare_decode_images_per_s"]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    images = sum(rates.values()) * seconds  # each measurement runs ``seconds``
    out = {f"images_per_s.{name}": rate for name, rate in rates.items()}
    out["cpu_us_per_image"] = 1e6 * cpu / images
    return out


@suite
class Wheel(Suite):
    name = "wheel"
    title = "The manylinux wheel against a build from source"
    options = {"wheel": "", "build": True, "seconds": 1.5, "threads": 2}
    quick = {"build": False, "seconds": 0.3}
    repeats = 3
    warmup = 0

    def prepare(self):
        o = self.options
        self.folder = tempfile.mkdtemp(prefix="recpipe-bench-wheel-")
        wheel = o["wheel"] or (build_wheel() if o["build"] else None)
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=REPO,
                       check=True, env=clean_env(), capture_output=True)
        self.sides = {"editable": ([sys.executable], clean_env(PYTHONPATH=str(REPO)))}
        self.wheel = wheel
        if wheel:
            python = wheel_venv(wheel, os.path.join(self.folder, "env"))
            self.sides = {"wheel": ([python], clean_env()), **self.sides}
        else:
            self.skip("wheel", "no wheel built (--set build=true or --set wheel=PATH)")
        self.files = {name: loaded_files(argv, env, self.folder)
                      for name, (argv, env) in self.sides.items()}
        return {"description": "recpipe demo's own sample (packed by the demo in each run)",
                "wheel": os.path.basename(wheel) if wheel else None,
                "wheel_bytes": os.path.getsize(wheel) if wheel else None}

    def contenders(self, point):
        o = self.options
        return {name: (lambda argv=argv, env=env: demo(argv, env, self.folder, o["seconds"],
                                                       o["threads"]))
                for name, (argv, env) in self.sides.items()}

    def ratios(self, point):
        return [Ratio(f"wheel/editable {config}", "wheel", "editable",
                      metric=f"images_per_s.{config}") for config in CONFIGS] + [
            Ratio("wheel/editable CPU us per image", "wheel", "editable",
                  metric="cpu_us_per_image")]

    def facts(self, point):
        return {"loaded": {name: {"recpipe": os.path.dirname(files["recpipe"]),
                                  "extensions": sorted({os.path.dirname(files[n])
                                                        for n in NATIVE if n in files})}
                           for name, files in self.files.items()}}

    def close(self):
        import shutil

        if getattr(self, "folder", None):
            shutil.rmtree(self.folder, ignore_errors=True)

    @classmethod
    def tables(cls, result):
        p, o = result["points"][0], result["options"]
        rows = []
        for config in CONFIGS + ("cpu us/image",):
            metric = ("cpu_us_per_image" if config == "cpu us/image"
                      else f"images_per_s.{config}")
            name = ("wheel/editable CPU us per image" if config == "cpu us/image"
                    else f"wheel/editable {config}")
            rows.append([config, fmt(figure(p, "wheel", metric), 0),
                         fmt(figure(p, "editable", metric), 0), fmt_ratio(ratio(p, name))])
        wheel = result["dataset"].get("wheel")
        size = result["dataset"].get("wheel_bytes")
        loaded = "; ".join(f"{name}: extensions from {', '.join(v['extensions'])}"
                           for name, v in p["facts"].get("loaded", {}).items())
        notes = (f"`recpipe demo --seconds {o['seconds']} --threads {o['threads']}` from each "
                 f"side; cpu us/image: all of a run's CPU over the images it decoded. "
                 + (f"Wheel: {wheel}, {size / 1e3:.0f} kB. " if wheel else "")
                 + f"Loaded: {loaded}.")
        return [Table("The wheel (libjpeg-turbo vendored) against the editable build",
                      ["measure", "wheel", "editable", "wheel/editable"], rows, notes=notes)]
