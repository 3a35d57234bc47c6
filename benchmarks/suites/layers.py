"""Two source trees A/B: a change that only moves code (rooms, names, import paths) must leave
``recpipe bench``, ``import recpipe`` and the planning cost where they were.

``base`` is the other tree (for example ``git worktree add /tmp/base <commit>`` then
``python setup.py build_ext --inplace`` there); this checkout is the other side. Each run of a
side is fresh processes with ``PYTHONPATH`` = that tree: ``recpipe bench FILE --json`` (bare
decode and the train/val pipelines), ``python -c "import recpipe"`` (best of ``imports``), and
``Augmenter.plan`` per sample for the benchmark recipes (``plan_samples`` samples of photo-like
sizes, their RNGs made beforehand). Ratios are this tree / base, paired by round. ``--quick``
without a ``base`` compares this tree with itself (a check that the suite runs).
"""

import json
import os
import subprocess
import sys
import time

from .. import data
from ..format import figure, fmt, fmt_ratio
from ..harness import REPO, Ratio, Skip, Suite, Table, suite

PLAN_RECIPES = {
    "faces": dict(data_shape=(3, 112, 112), rand_mirror=True),
    "train": dict(data_shape=(3, 224, 224), random_resized_crop=True, min_random_area=0.08,
                  max_random_area=1.0, min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
                  rand_mirror=True),
    "val": dict(data_shape=(3, 224, 224), resize=256),
    "aug level 3": dict(data_shape=(3, 224, 224), rand_crop=True, rand_mirror=True,
                        max_aspect_ratio=0.25, max_rotate_angle=10, max_shear_ratio=0.1,
                        random_h=36, random_s=50, random_l=50),
    "PCA + colour jitter": dict(data_shape=(3, 224, 224), random_resized_crop=True,
                                min_random_area=0.08, max_random_area=1.0,
                                min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
                                rand_mirror=True, brightness=0.4, contrast=0.4,
                                saturation=0.4, pca_noise=0.1, mean_r=123.68, mean_g=116.78,
                                mean_b=103.94, std_r=58.4, std_g=57.12, std_b=57.38),
}
SIZES = ((375, 500), (480, 640), (333, 500), (500, 375), (112, 112), (600, 800))
# planning cost in a tree, imports only what every tree since the one planner has
PLAN_CHILD = """
import json, sys, time
from recpipe.decode.augment import AugmentConfig, Augmenter, sample_rng
recipe, samples, sizes = json.loads(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
augmenter = Augmenter(AugmentConfig(**{k: tuple(v) if isinstance(v, list) else v
                                       for k, v in recipe.items()}))
sizes = [sizes[i % len(sizes)] for i in range(samples)]
rngs = [sample_rng(12, 1, i) for i in range(samples)]
plan = augmenter.plan
start = time.perf_counter()
for (height, width), rng in zip(sizes, rngs):
    plan(height, width, rng)
print(json.dumps({"us": (time.perf_counter() - start) / samples * 1e6}))
"""


def _env(tree):
    return dict(os.environ, PYTHONPATH=tree)


def bench(tree, rec, seconds, threads):
    """``{measure: images/s}`` of one ``recpipe bench`` run with ``tree``'s recpipe."""
    done = subprocess.run([sys.executable, "-m", "recpipe", "bench", rec, "--json",
                           "--seconds", str(seconds), "--threads", str(threads)],
                          capture_output=True, text=True, cwd=tree, env=_env(tree), timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"recpipe bench in {tree}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    rates = {"bench.bare decode": result["bare_decode_images_per_s"]}
    rates.update({f"bench.{name} pipeline": config["images_per_s"]
                  for name, config in result["configs"].items()})
    return rates


def import_ms(tree, repeats):
    """Best wall time of ``python -c "import recpipe"`` with ``tree``'s recpipe, in ms."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import recpipe"], check=True, cwd=tree,
                       env=_env(tree), timeout=300)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def plan_us(tree, recipe, samples):
    sizes = [[112, 112]] if recipe == "faces" else [list(s) for s in SIZES]
    done = subprocess.run([sys.executable, "-c", PLAN_CHILD, json.dumps(PLAN_RECIPES[recipe]),
                           str(samples), json.dumps(sizes)], capture_output=True, text=True,
                          cwd=tree, env=_env(tree), timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"planning in {tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["us"]


@suite
class Layers(Suite):
    name = "layers"
    title = "Two source trees A/B: recpipe bench, import time and planning cost"
    options = {"base": "", "rec": "", "seconds": 2.0, "threads": 2, "imports": 5,
               "plan_samples": 20000, "plan_recipes": ",".join(PLAN_RECIPES), "photos": 1000}
    quick = {"seconds": 0.3, "imports": 1, "plan_samples": 500, "plan_recipes": "train",
             "photos": 200}
    repeats = 3
    warmup = 0

    def prepare(self):
        o = self.options
        base = o["base"]
        if not base:
            if o["seconds"] > 0.5:  # a full run needs the other tree
                raise Skip("give the other tree: --set base=PATH (built in place)")
            base = str(REPO)
        self.sides = {"base": os.path.abspath(base), "this tree": str(REPO)}
        for tree in self.sides.values():
            if not os.path.isdir(os.path.join(tree, "recpipe")):
                raise ValueError(f"{tree} is not a recpipe source tree")
        self.rec = o["rec"] or data.photos_rec(self.work.parent / "data", o["photos"])
        self.recipes = [r for r in o["plan_recipes"].split(",") if r]
        unknown = sorted(set(self.recipes) - set(PLAN_RECIPES))
        if unknown:
            raise ValueError(f"plan_recipes {unknown}: choose from {list(PLAN_RECIPES)}")
        described = data.describe_rec(self.rec, "bench file")
        described["base"] = self.sides["base"]
        described["description"] += f"; base tree {self.sides['base']}"
        return described

    def contenders(self, point):
        o = self.options

        def side(tree):
            figures = bench(tree, self.rec, o["seconds"], o["threads"])
            figures["import_ms"] = import_ms(tree, o["imports"])
            for recipe in self.recipes:
                figures[f"plan_us.{recipe}"] = plan_us(tree, recipe, o["plan_samples"])
            return figures
        return {name: (lambda tree=tree: side(tree)) for name, tree in self.sides.items()}

    def ratios(self, point):
        metrics = (["bench.bare decode", "bench.train pipeline", "bench.val pipeline",
                    "import_ms"] + [f"plan_us.{r}" for r in self.recipes])
        return [Ratio(f"this/base {m}", "this tree", "base", metric=m) for m in metrics]

    @classmethod
    def tables(cls, result):
        p = result["points"][0]
        rows = []
        for r in p["ratios"]:
            metric = r["metric"]
            label = (metric.replace("bench.", "").replace("plan_us.", "plan us a sample: ")
                     .replace("import_ms", "import recpipe (ms)")
                     + (" (images/s)" if metric.startswith("bench.") else ""))
            rows.append([label, fmt(figure(p, "base", metric), 2),
                         fmt(figure(p, "this tree", metric), 2), fmt_ratio(r, 3)])
        return [Table("This tree against the base tree (medians; ratio this / base by round)",
                      ["measure", "base", "this tree", "this / base"], rows,
                      notes=f"Base: `{result['dataset'].get('base')}`; recpipe bench "
                            f"--seconds {result['options']['seconds']} --threads "
                            f"{result['options']['threads']}.")]
