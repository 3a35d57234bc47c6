"""Planning: every random decision of one sample drawn up front, in a fixed order, from one
block of uniforms (``SamplePlan``), so a sample's result depends only on its random stream."""

import math
from typing import NamedTuple, Optional, Tuple

import numpy as np

from ...errors import DecodeError
from .config import aspect_range

__all__ = ["Planner", "SamplePlan", "N_UNIFORM", "U_CROP", "U_MIRROR", "randint",
           "resize_shorter_size"]

_RRC_TRIES = 10
# AlexNet PCA lighting (RGB), as in mx.image.LightingAug / gluoncv
_PCA_EIGVAL = np.array([55.46, 4.794, 1.148], dtype=np.float32)
_PCA_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                        [-0.5808, -0.0045, -0.8140],
                        [-0.5836, -0.6948, 0.4203]], dtype=np.float32)


def _pca_offsets(normals, pca_noise):
    """AlexNet's PCA lighting offsets (RGB) from three standard normals, in float32 with one
    fixed order of operations (eigvec @ (alpha * eigval) row by row as ``(v0 x0 + v1 x1) + v2
    x2``, no fused multiply-add; BLAS's order would depend on the CPU), which
    ``recpipe._batch`` repeats."""
    alpha = np.asarray(normals, dtype=np.float64).astype(np.float32) * np.float32(pca_noise)
    x = alpha * _PCA_EIGVAL
    rows = (_PCA_EIGVEC[:, 0] * x[0] + _PCA_EIGVEC[:, 1] * x[1]) + _PCA_EIGVEC[:, 2] * x[2]
    return tuple(float(v) for v in rows)


class SamplePlan(NamedTuple):
    """Every decision for one sample. Sizes are (height, width); boxes are (x, y, w, h).

    ``crop`` is in the coordinates of ``crop_from`` (the image after resize/affine/pad, or its
    upscaled version when ``upscale`` is set); ``resize_crop`` says whether the crop is resized
    to the output (random-resized or random-size crop) or is already output-sized.
    """

    source_size: Tuple[int, int]
    resized_size: Tuple[int, int]
    affine: Optional[tuple]          # ((2x3 matrix rows), (height, width)) or None
    work_size: Tuple[int, int]       # after resize, affine and pad
    upscale: Optional[Tuple[int, int]]
    crop: Tuple[int, int, int, int]
    resize_crop: bool
    inter: Tuple[int, int, int]      # (resize step, affine, crop/upscale): 0-4 drawn, or 9
    mirror: bool
    hls: Optional[Tuple[int, int, int]]
    colour: Tuple[Tuple[int, float], ...]  # (op, alpha): 0 brightness, 1 contrast, 2 saturation
    pca: Optional[Tuple[float, float, float]]  # RGB offsets
    contrast: float
    illumination: float

    @property
    def source_box(self):
        """(x0, y0, x1, y1) in source pixels that the output is made of (floats)."""
        if self.affine is not None:
            return 0.0, 0.0, float(self.source_size[1]), float(self.source_size[0])
        x, y, w, h = self.crop
        from_h, from_w = self.upscale or self.work_size
        pad = (self.work_size[0] - self.resized_size[0]) // 2
        sy = self.resized_size[0] / self.source_size[0]
        sx = self.resized_size[1] / self.source_size[1]
        fy = self.work_size[0] / from_h
        fx = self.work_size[1] / from_w
        return ((x * fx - pad) / sx, (y * fy - pad) / sy,
                ((x + w) * fx - pad) / sx, ((y + h) * fy - pad) / sy)


# uniform slots of the per-sample block (fixed order)
U_INTER = 0            # 3 slots
U_AFFINE = 3           # shear, angle, scale, ratio, rotate_list index
U_RRC = 8              # 10 tries x (area, ratio, x, y)
U_CROP = 48            # crop size, x, y
U_MIRROR = 51
U_HLS = 52             # h, s, l
U_ORDER = 55           # 3 keys
U_COLOUR = 58          # brightness, contrast, saturation
U_NORM = 61            # contrast, illumination
N_UNIFORM = 64


def randint(u, low, high):
    """Integer uniform in [low, high] from a uniform u in [0, 1)."""
    return min(high, low + int(u * (high - low + 1)))


def resize_shorter_size(height, width, size):
    """MXNet's resize step: shorter edge -> size, other edge ``size * long // short``."""
    if height > width:
        return size * height // width, size
    return size, size * width // height


class Planner:
    """Draws the ``SamplePlan`` of one ``AugmentConfig``; shareable between threads."""

    def __init__(self, config):
        self.config = c = config
        self._out_h, self._out_w = c.out_hw
        self._has_colour = bool(c.brightness or c.contrast or c.saturation)
        self._has_hls = bool(c.random_h or c.random_s or c.random_l)
        self._affine = c.affine_active
        self._crop_size = c.max_crop_size != -1
        self._rrc = c.random_resized_crop and (c.min_random_area != 1 or c.max_random_area != 1
                                               or c.max_aspect_ratio != 0)

    @property
    def random_resized(self):
        """True when samples draw a random-resized crop (a non-trivial area or aspect range)."""
        return self._rrc

    @property
    def random_size(self):
        """True when samples draw a random-size square crop (``min/max_crop_size``)."""
        return self._crop_size

    def plan(self, height, width, rng):
        """Draw everything for a ``height`` x ``width`` source image from ``rng``."""
        c = self.config
        if height <= 0 or width <= 0:
            raise DecodeError(f"invalid image size {width}x{height}")
        u = rng.random(N_UNIFORM).tolist()
        pca = None
        if c.pca_noise > 0:
            pca = _pca_offsets(rng.standard_normal(3), c.pca_noise)
        inter = tuple(randint(u[U_INTER + i], 0, 4) if c.inter_method == 10 else c.inter_method
                      for i in range(3))
        resized = (resize_shorter_size(height, width, c.resize) if c.resize != -1
                   else (height, width))
        affine, work = None, resized
        if self._affine:
            affine = self._plan_affine(resized, u)
            work = affine[1]
        work = (work[0] + 2 * c.pad, work[1] + 2 * c.pad)
        upscale, crop, resize_crop = self._plan_crop(work, u)
        return SamplePlan(
            source_size=(height, width), resized_size=resized, affine=affine, work_size=work,
            upscale=upscale, crop=crop, resize_crop=resize_crop, inter=inter,
            mirror=c.mirror or (c.rand_mirror and u[U_MIRROR] < 0.5),
            hls=self._plan_hls(u), colour=self._plan_colour(u), pca=pca,
            contrast=1.0 + c.max_random_contrast * (2 * u[U_NORM] - 1),
            illumination=c.max_random_illumination * (2 * u[U_NORM + 1] - 1))

    def _plan_affine(self, size, u):
        c = self.config
        rows, cols = size
        shear = u[U_AFFINE] * c.max_shear_ratio * 2 - c.max_shear_ratio
        angle = randint(u[U_AFFINE + 1], -c.max_rotate_angle, c.max_rotate_angle)
        if c.rotate > 0:
            angle = c.rotate
        if c.rotate_list:
            angle = c.rotate_list[randint(u[U_AFFINE + 4], 0, len(c.rotate_list) - 1)]
        a, b = math.cos(angle / 180.0 * math.pi), math.sin(angle / 180.0 * math.pi)
        scale = u[U_AFFINE + 2] * (c.max_random_scale - c.min_random_scale) + c.min_random_scale
        low, high = aspect_range(c)
        ratio = u[U_AFFINE + 3] * (high - low) + low
        hs = 2 * scale / (1 + ratio)
        ws = ratio * hs
        new_w = max(c.min_img_size, min(c.max_img_size, scale * cols))
        new_h = max(c.min_img_size, min(c.max_img_size, scale * rows))
        m00, m01 = hs * a - shear * b * ws, hs * b + shear * a * ws
        m10, m11 = -b * ws, a * ws
        m02 = (new_w - (m00 * cols + m01 * rows)) / 2
        m12 = (new_h - (m10 * cols + m11 * rows)) / 2
        out_size = (max(1, int(new_h)), max(1, int(new_w)))
        return ((m00, m01, m02), (m10, m11, m12)), out_size

    def _plan_crop(self, work, u):
        """(upscale, crop box, resize_crop) in the work image."""
        c = self.config
        rows, cols = work
        if self._rrc:
            box = self._plan_rrc(rows, cols, u)
            if box is not None:
                return None, box, True
        elif self._crop_size:
            if min(rows, cols) < c.max_crop_size:
                raise DecodeError(f"image of {cols}x{rows} after resize/pad is smaller than "
                                  f"max_crop_size={c.max_crop_size}")
            size = randint(u[U_CROP], c.min_crop_size, c.max_crop_size)
            x, y = self._place(rows - size, cols - size, u)
            return None, (x, y, size, size), True
        out_h, out_w = self._out_h, self._out_w
        upscale = None
        if rows < out_h or cols < out_w:
            factor = max(out_h / rows, out_w / cols)
            rows = max(out_h, int(rows * factor + 0.5))
            cols = max(out_w, int(cols * factor + 0.5))
            upscale = (rows, cols)
        x, y = self._place(rows - out_h, cols - out_w, u)
        return upscale, (x, y, out_w, out_h), False

    def _place(self, spare_rows, spare_cols, u):
        if self.config.rand_crop:
            return (randint(u[U_CROP + 1], 0, spare_cols),
                    randint(u[U_CROP + 2], 0, spare_rows))
        return spare_cols // 2, spare_rows // 2

    def _plan_rrc(self, rows, cols, u):
        c = self.config
        low, high = aspect_range(c)
        log_low, log_high = math.log(low), math.log(high)
        area = rows * cols
        for i in range(_RRC_TRIES):
            base = U_RRC + 4 * i
            target = area * (c.min_random_area + u[base] * (c.max_random_area - c.min_random_area))
            ratio = math.exp(log_low + u[base + 1] * (log_high - log_low))
            w = int(round(math.sqrt(target * ratio)))
            h = int(round(math.sqrt(target / ratio)))
            if 0 < w <= cols and 0 < h <= rows:
                return randint(u[base + 2], 0, cols - w), randint(u[base + 3], 0, rows - h), w, h
        return None

    def _plan_hls(self, u):
        c = self.config
        if not self._has_hls:
            return None
        return tuple(int(u[U_HLS + i] * v * 2 - v)
                     for i, v in enumerate((c.random_h, c.random_s, c.random_l)))

    def _plan_colour(self, u):
        c = self.config
        if not self._has_colour:
            return ()
        order = sorted(range(3), key=lambda i: u[U_ORDER + i])
        limits = (c.brightness, c.contrast, c.saturation)
        return tuple((op, 1.0 + limits[op] * (2 * u[U_COLOUR + op] - 1))
                     for op in order if limits[op] > 0)
