"""The manylinux wheel (libjpeg-turbo vendored) against the editable checkout: same speed?

Installs the wheel (built by ``tools/build_wheel.sh`` into .bench/wheel unless --wheel names one)
into a fresh venv beside this Python's site-packages (recpipe itself only from the wheel), builds
the checkout's C extensions in place, then runs ``recpipe demo --json`` from each, alternating
which goes first, --rounds times. Reports the wheel's size, each configuration's images/s
(median over rounds) and the wheel/editable ratio (also paired: the median of each round's
ratio), CPU time per decoded image (robust to other jobs on shared cores), and which files each
side loaded (so a side that silently fell back to Python shows).

    python tools/bench_wheel.py [--rounds 3] [--seconds 1.5] [--wheel PATH] [--json OUT]
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NATIVE = ("_batch", "_kernels", "_resize", "_colour", "_crc32c", "_plan")
_WHICH = ("import json, recpipe\nfiles = {'recpipe': recpipe.__file__}\n"
          "for n in %r:\n    files[n] = __import__('recpipe.' + n, fromlist=['_']).__file__\n"
          "print(json.dumps(files))\n" % (NATIVE,))


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def build_wheel():
    out = os.path.join(ROOT, ".bench", "wheel")
    subprocess.run(["bash", os.path.join(ROOT, "tools", "build_wheel.sh"), out, sys.executable],
                   check=True, stdout=subprocess.DEVNULL, env=clean_env())
    tag = "cp%d%d" % sys.version_info[:2]
    return next(os.path.join(out, f) for f in sorted(os.listdir(out))
                if f.endswith(".whl") and f"-{tag}-" in f)


def wheel_venv(wheel, folder):
    python = os.path.join(folder, "bin", "python")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    folder], check=True, env=clean_env())
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q",
                    "--disable-pip-version-check", "--no-deps", "--no-index", wheel],
                   check=True, env=clean_env())
    return python


def sides(venv_python):
    """{name: (argv prefix, env)}: the wheel's venv, and this Python on the checkout."""
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=ROOT,
                   check=True, env=clean_env())
    return {"wheel": ([venv_python], clean_env()),
            "editable": ([sys.executable], clean_env(PYTHONPATH=ROOT))}


def loaded_files(argv, env, cwd):
    run = subprocess.run(argv + ["-c", _WHICH], capture_output=True, text=True, check=True,
                         env=env, cwd=cwd)
    return json.loads(run.stdout)


def demo(argv, env, cwd, seconds, threads):
    """{config: images/s} of one ``recpipe demo`` run, plus "cpu us/image": the run's CPU time
    (all of it: sample, pack, imports, measuring) over the images it decoded, which other jobs
    on shared cores disturb far less than the wall-clock rates."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(argv + ["-m", "recpipe", "demo", "--json", "--seconds", str(seconds),
                                 "--threads", str(threads)],
                         capture_output=True, text=True, check=True, env=env, cwd=cwd)
    if "running without" in run.stderr:
        raise SystemExit(f"{argv[0]} ran on a slow path: {run.stderr}")
    results = json.loads(run.stdout)
    rates = {name: config["images_per_s"] for name, config in results["configs"].items()}
    rates["bare decode"] = results["bare_decode_images_per_s"]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    images = sum(rates.values()) * seconds  # each measurement runs ``seconds``
    rates["cpu us/image"] = 1e6 * cpu / images
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.5, help="demo's timed seconds each")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--wheel", help="a built wheel (default: build one with build_wheel.sh)")
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.threads < 1:
        parser.error("--rounds and --threads must be >= 1, --seconds > 0")

    wheel = args.wheel or build_wheel()
    with tempfile.TemporaryDirectory(prefix="recpipe-bench-wheel-") as folder:
        runners = sides(wheel_venv(wheel, os.path.join(folder, "env")))
        files = {name: loaded_files(argv, env, folder) for name, (argv, env) in runners.items()}
        runs = {name: [] for name in runners}
        for round_index in range(args.rounds):
            order = list(runners) if round_index % 2 == 0 else list(reversed(list(runners)))
            for name in order:
                argv, env = runners[name]
                runs[name].append(demo(argv, env, folder, args.seconds, args.threads))
    report(wheel, files, runs, args)


def report(wheel, files, runs, args):
    print(f"wheel: {os.path.basename(wheel)}: {os.path.getsize(wheel) / 1e3:.0f} kB")
    for name, loaded in files.items():
        print(f"{name}: recpipe from {os.path.dirname(loaded['recpipe'])}, extensions from "
              f"{sorted({os.path.dirname(loaded[n]) for n in NATIVE})}")
    print(f"recpipe demo --seconds {args.seconds} --threads {args.threads}, {args.rounds} "
          "rounds alternated; images/s (cpu: CPU us per decoded image), median of rounds")
    print(f"{'config':<12} {'wheel':>9} {'editable':>9} {'ratio':>6} {'paired':>7}  "
          "(paired: median of each round's wheel/editable)")
    for config in runs["wheel"][0]:
        wheel_rate = statistics.median(r[config] for r in runs["wheel"])
        edit_rate = statistics.median(r[config] for r in runs["editable"])
        paired = statistics.median(w[config] / e[config]
                                   for w, e in zip(runs["wheel"], runs["editable"]))
        print(f"{config:<12} {wheel_rate:>9.0f} {edit_rate:>9.0f} {wheel_rate / edit_rate:>6.2f} "
              f"{paired:>7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"wheel": wheel, "bytes": os.path.getsize(wheel), "files": files,
                       "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
