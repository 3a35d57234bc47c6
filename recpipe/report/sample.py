"""A small built-in sample dataset: deterministic synthetic photos in class folders."""

import logging
import os

import numpy as np
from ..image.opencv import load_cv2

__all__ = ["make_sample_images"]

log = logging.getLogger(__name__)


def _photo(rng, label, size, noise):
    """A smooth colour field with shapes and sensor-like noise, so JPEG sizes look real."""
    cv2 = load_cv2()
    h, w = size
    ys, xs = np.mgrid[0:h // 4, 0:w // 4].astype(np.float32) * 4
    base = np.stack([
        128 + 100 * np.sin(xs / (17 + 3 * label) + rng.uniform(0, 6)),
        128 + 100 * np.cos(ys / (23 + 2 * label) + rng.uniform(0, 6)),
        128 + 100 * np.sin((xs + ys) / (31 + label)),
    ], axis=-1)
    img = cv2.resize(np.clip(base, 0, 255).astype(np.uint8), (w, h))
    for _ in range(6):
        center = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        color = tuple(int(c) for c in rng.integers(0, 256, 3))
        cv2.circle(img, center, int(rng.integers(8, max(9, min(h, w) // 3))), color, -1)
    shift = int(rng.integers(0, noise.shape[0] - h + 1)), int(rng.integers(0,
                                                                           noise.shape[1] - w + 1))
    return cv2.add(img, noise[shift[0]:shift[0] + h, shift[1]:shift[1] + w], dtype=cv2.CV_8U)


def make_sample_images(root, *, classes=4, per_class=64, size=(360, 480), seed=0, quality=90):
    """Write ``classes * per_class`` JPEGs under ``root/classNN/`` and return their paths."""
    cv2 = load_cv2()
    rng = np.random.default_rng(seed)
    side = max(size) + 64
    noise = rng.integers(0, 12, (side, side, 3), dtype=np.uint8)
    paths = []
    for label in range(classes):
        folder = os.path.join(root, f"class{label:02d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            shape = size if i % 2 == 0 else size[::-1]
            bgr = cv2.cvtColor(_photo(rng, label, shape, noise), cv2.COLOR_RGB2BGR)
            path = os.path.join(folder, f"img{i:04d}.jpg")
            ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
            if not ok:
                raise RuntimeError(f"could not encode sample image {path}")
            with open(path, "wb") as f:
                f.write(buf.tobytes())
            paths.append(path)
    log.info("wrote %d sample images under %s", len(paths), root)
    return paths
