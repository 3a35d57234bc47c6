"""Planning cost per sample on the Python path: ``Augmenter.plan`` (the uniforms drawn from the
sample's RNG, the plan, the ``SamplePlan``) for the benchmark recipes, in source trees compared
alternately (e.g. the Python planner before issue 21's one planner, and after it).

Each (recipe, tree) point runs in a fresh child process (``PYTHONPATH`` = the tree) that plans
``--samples`` samples of photo-like sizes, their RNGs made beforehand (outside the timing), and
prints microseconds a plan; the table gives the median over ``--rounds`` alternated rounds.

    python tools/bench_plan.py --trees before=/tmp/base,after=. --rounds 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gil_table import AUG_LEVEL_3, NORM, TRAIN, VAL  # noqa: E402

RECIPES = {
    "faces": dict(data_shape=(3, 112, 112), rand_mirror=True),
    "train": dict(TRAIN),
    "val": dict(VAL),
    "aug level 3": dict(AUG_LEVEL_3),
    "PCA + colour jitter": dict(TRAIN, brightness=0.4, contrast=0.4, saturation=0.4,
                                pca_noise=0.1, **NORM),
}
SIZES = ((375, 500), (480, 640), (333, 500), (500, 375), (112, 112), (600, 800))


def child(recipe, samples):
    from recpipe.decode.augment import AugmentConfig, Augmenter, sample_rng

    augmenter = Augmenter(AugmentConfig(**RECIPES[recipe]))
    sizes = [SIZES[i % len(SIZES)] for i in range(samples)]
    if recipe == "faces":
        sizes = [(112, 112)] * samples
    rngs = [sample_rng(12, 1, i) for i in range(samples)]
    plan = augmenter.plan
    start = time.perf_counter()
    for (height, width), rng in zip(sizes, rngs):
        plan(height, width, rng)
    elapsed = time.perf_counter() - start
    print(json.dumps({"us": elapsed / samples * 1e6}), flush=True)


def point(tree, recipe, samples):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-recipe", recipe,
                          "--samples", str(samples)], env=env, cwd=tree, capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{tree} {recipe}: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["us"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default=f"this={os.path.dirname(HERE)}",
                        help="comma list of NAME=PATH source trees (alternated)")
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--child-recipe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_recipe:
        return child(args.child_recipe, args.samples)
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    recipes = args.recipes.split(",")
    results = {}
    for _ in range(args.rounds):
        for recipe in recipes:
            for name, tree in trees.items():  # alternated
                results.setdefault((recipe, name), []).append(point(tree, recipe, args.samples))
    print(f"Augmenter.plan, us a sample: medians of {args.rounds} alternated rounds of "
          f"{args.samples} samples\n")
    names = list(trees)
    print("| recipe | " + " | ".join(names) + (" | ratio |" if len(names) == 2 else " |"))
    print("|---" * (len(names) + 1 + (len(names) == 2)) + "|")
    for recipe in recipes:
        medians = [statistics.median(results[(recipe, name)]) for name in names]
        cells = " | ".join(f"{m:.2f}" for m in medians)
        ratio = f" | {medians[1] / medians[0]:.2f}x |" if len(names) == 2 else " |"
        print(f"| {recipe} | {cells}{ratio}")


if __name__ == "__main__":
    main()
