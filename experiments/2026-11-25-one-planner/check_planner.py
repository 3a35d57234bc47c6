"""Two source trees' planners compared over random (config, image size, seed) draws: every
``SamplePlan`` field bit for bit (floats by their hex) and every ``DecodeError`` message, so a
change to the planner (csrc/plan/plan.h, or the Python planner before it) is proved not to move a
single decision.

Each tree plans the same draws in a child process (``PYTHONPATH`` = the tree) and prints one
digest a draw; the first draw whose digests differ is planned again in both and shown.

    python experiments/2026-11-25-one-planner/check_planner.py --trees before=/tmp/base,after=. \\
        --draws 100000
"""

import argparse
import hashlib
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _bits(value):
    if isinstance(value, float):
        return ("f", value.hex())
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if value is None:
        return None
    return tuple(_bits(v) for v in value)


def draw_config(rng):
    """Keywords of a random AugmentConfig across the planner's whole option space."""
    h, w = int(rng.integers(1, 300)), int(rng.integers(1, 300))
    v = {"data_shape": (3, h, w)}

    def maybe(p=0.5):
        return rng.random() < p

    if maybe(0.4):
        v["resize"] = int(rng.integers(1, 400))
    if maybe():
        v["rand_crop"] = True
    if maybe():
        v["rand_mirror"] = True
    if maybe(0.1):
        v["mirror"] = True
    mode = rng.integers(0, 4)
    if mode == 0:  # rrc
        v["random_resized_crop"] = True
        v.pop("rand_crop", None)
        lo = float(rng.uniform(0, 1))
        v["min_random_area"] = lo
        v["max_random_area"] = float(rng.uniform(lo, 1)) if maybe(0.9) else lo
        if maybe(0.7):
            low = float(rng.uniform(0.05, 1.5))
            if maybe():
                v["min_aspect_ratio"] = low
                v["max_aspect_ratio"] = float(rng.uniform(low, 3))
            else:
                v["max_aspect_ratio"] = float(rng.uniform(0, 0.99))
    elif mode == 1:  # affine
        if maybe():
            v["max_rotate_angle"] = int(rng.integers(0, 360))
        if maybe(0.3):
            v["rotate"] = int(rng.integers(-5, 360))
        if maybe(0.3):
            v["rotate_list"] = tuple(int(a) for a in rng.integers(-360, 360,
                                                                     int(rng.integers(1, 80))))
        if maybe():
            v["max_shear_ratio"] = float(rng.uniform(0, 0.5))
        if maybe():
            lo = float(rng.uniform(0.05, 1.5))
            v["min_random_scale"] = lo
            v["max_random_scale"] = float(rng.uniform(lo, 3))
        if maybe():
            if maybe():
                low = float(rng.uniform(0.05, 1.5))
                v["min_aspect_ratio"] = low
                v["max_aspect_ratio"] = float(rng.uniform(low, 3))
            else:
                v["max_aspect_ratio"] = float(rng.uniform(0, 0.99))
        if maybe(0.3):
            v["max_img_size"] = float(rng.uniform(1, 500))
        if maybe(0.3):
            v["min_img_size"] = float(rng.uniform(0, 300))
    if mode in (1, 2) and maybe(0.4):
        v["pad"] = int(rng.integers(0, 40))
    if mode == 3 or (mode in (1, 2) and maybe(0.2)):  # random-size crop
        lo = int(rng.integers(1, 300))
        v["min_crop_size"] = lo
        v["max_crop_size"] = int(rng.integers(lo, 400))
    if maybe(0.4):
        v["inter_method"] = int(rng.choice([0, 1, 2, 3, 4, 9, 10, 10, 10]))
    for k in ("brightness", "contrast", "saturation"):
        if maybe(0.35):
            v[k] = float(rng.uniform(0, 1)) if maybe(0.9) else 0.0
    if maybe(0.3):
        v["pca_noise"] = float(rng.uniform(0, 2))
    for k, top in (("random_h", 180), ("random_s", 255), ("random_l", 255)):
        if maybe(0.25):
            v[k] = int(rng.integers(-top, top + 1))
    if maybe(0.3):
        v["max_random_contrast"] = float(rng.uniform(0, 1))
    if maybe(0.3):
        v["max_random_illumination"] = float(rng.uniform(0, 50))
    return v


def _draws(seed, count):
    """``(keywords, height, width, index)`` of each draw: 4 image sizes per configuration."""
    rng = np.random.default_rng(seed)
    made = 0
    while made < count:
        keywords = draw_config(rng)
        for _ in range(4):
            height, width = int(rng.integers(1, 700)), int(rng.integers(1, 700))
            if rng.random() < 0.02:
                height = int(rng.integers(-2, 1))
            yield keywords, height, width, int(rng.integers(0, 2 ** 40))
            made += 1


def _outcome(keywords, height, width, index, seed):
    from recpipe.decode.augment import AugmentConfig, Augmenter, sample_rng
    from recpipe.errors import DecodeError

    try:
        augmenter = Augmenter(AugmentConfig(**keywords))
    except (ValueError, NotImplementedError) as e:
        return ("refused", str(e))
    try:
        return _bits(tuple(augmenter.plan(height, width, sample_rng(seed, 1, index))))
    except DecodeError as e:
        return ("error", str(e))


def child(seed, count, show):
    for number, draw in enumerate(_draws(seed, count)):
        outcome = repr(_outcome(*draw, seed))
        if show is None:
            print(hashlib.blake2b(outcome.encode(), digest_size=8).hexdigest())
        elif number == show:
            print(draw, "\n", outcome)
            return


def _run(tree, seed, count, show=None):
    command = [sys.executable, os.path.abspath(__file__), "--child", "--seed", str(seed),
               "--draws", str(count)] + ([] if show is None else ["--show", str(show)])
    out = subprocess.run(command, env=dict(os.environ, PYTHONPATH=os.path.abspath(tree)),
                         cwd=tree, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {out.stderr.strip()[-2000:]}")
    return out.stdout.splitlines()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", help="NAME=PATH,NAME=PATH: the two trees")
    parser.add_argument("--draws", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--show", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.seed, args.draws, args.show)
    if not args.trees or args.trees.count("=") != 2:
        parser.error("--trees NAME=PATH,NAME=PATH is required")
    (first, a), (second, b) = (item.split("=", 1) for item in args.trees.split(","))
    left, right = _run(a, args.seed, args.draws), _run(b, args.seed, args.draws)
    for number, (x, y) in enumerate(zip(left, right)):
        if x != y:
            shown = {name: "\n".join(_run(tree, args.seed, args.draws, number))
                     for name, tree in ((first, a), (second, b))}
            print(f"draw {number} differs:\n{first}: {shown[first]}\n{second}: {shown[second]}")
            return 1
    print(f"{len(left)} draws (seed {args.seed}): {first} and {second} plan them identically")
    return 0


if __name__ == "__main__":
    sys.exit(main())
