"""Planning: every random decision of one sample drawn up front, in a fixed order, from one
block of uniforms (``SamplePlan``), so a sample's result depends only on its random stream.

The decisions are made in C, by the one planner both decode paths call (``csrc/plan/plan.h``:
``recpipe._plan`` here, ``recpipe._batch`` for the runs it decodes), so the two paths can differ
only in their kernels. ``Planner`` packs an ``AugmentConfig`` into the planner's options once,
draws the sample's uniforms (and normals for PCA lighting) and builds the ``SamplePlan``. The
draws are C's too (csrc/plan/draws.h, ``recpipe._plan.draws``) for a ``SampleStream``, the
stream recpipe's loaders plan with; a numpy Generator of one's own is drawn from as numpy does.
"""

from typing import NamedTuple, Optional, Tuple

from ..._optional import native
from ...errors import DecodeError
from .config import aspect_range
from .rng import SampleStream

__all__ = ["Planner", "SamplePlan", "N_UNIFORM", "U_CROP", "U_MIRROR", "plan_options",
           "resize_shorter_size"]

# the uniform slots of the per-sample block: U_<NAME> is recpipe._plan.DRAW_SLOTS[<name>]
# (csrc/plan/plan.h), N_UNIFORM its "drawn"; looked up when first asked for (the extension is
# required, but importing recpipe does not need it built)
_SLOT_NAMES = {"N_UNIFORM": "drawn", "U_INTER": "inter", "U_AFFINE": "affine", "U_RRC": "rrc",
               "U_CROP": "crop", "U_MIRROR": "mirror", "U_HLS": "hls", "U_ORDER": "order",
               "U_COLOUR": "colour", "U_NORM": "norm"}


def __getattr__(name):
    if name in _SLOT_NAMES:
        return native("_plan").DRAW_SLOTS[_SLOT_NAMES[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    native: bytes = b""  # the C plan (csrc/plan/plan.h): what the geometry and renderer read

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


def resize_shorter_size(height, width, size):
    """MXNet's resize step: shorter edge -> size, other edge ``size * long // short``."""
    return native("_plan").resize_shorter(height, width, size)


def plan_options(config, random_resized):
    """The planner's options (``recpipe._plan.OPTION_FIELDS``, in order) for ``config``, an
    ``AugmentConfig``; ``random_resized``: whether samples draw a random-resized crop."""
    out_h, out_w = config.out_hw
    low, high = aspect_range(config)
    return (int(out_h), int(out_w), int(config.resize), bool(config.rand_crop),
            bool(config.mirror), bool(config.rand_mirror), bool(random_resized),
            float(config.min_random_area), float(config.max_random_area), float(low),
            float(high), float(config.brightness), float(config.contrast),
            float(config.saturation), float(config.max_random_contrast),
            float(config.max_random_illumination), float(config.pca_noise),
            int(config.random_h), int(config.random_s), int(config.random_l),
            bool(config.affine_active), float(config.max_shear_ratio),
            int(config.max_rotate_angle), int(config.rotate),
            tuple(int(v) for v in config.rotate_list), float(config.min_random_scale),
            float(config.max_random_scale), float(config.min_img_size),
            float(config.max_img_size), int(config.pad), int(config.inter_method),
            int(config.min_crop_size), int(config.max_crop_size))


class Planner:
    """Draws the ``SamplePlan`` of one ``AugmentConfig``; shareable between threads.

    ``options``: the config packed for the planner (``plan_options``), validated here."""

    def __init__(self, config):
        self.config = c = config
        self._crop_size = c.max_crop_size != -1
        self._rrc = c.random_resized_active
        self._pca = c.pca_noise > 0
        self._plan = native("_plan")
        self._uniforms = self._plan.DRAW_SLOTS["drawn"]
        self.options = plan_options(c, self._rrc)
        try:
            self._plan.check(self.options)
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"augmentation options the planner cannot take: {e}") from e

    @property
    def random_resized(self):
        """True when samples draw a random-resized crop (a non-trivial area or aspect range)."""
        return self._rrc

    @property
    def random_size(self):
        """True when samples draw a random-size square crop (``min/max_crop_size``)."""
        return self._crop_size

    def plan(self, height, width, rng):
        """Draw everything for a ``height`` x ``width`` source image from ``rng``: a
        ``SampleStream`` (``Augmenter.sample_rng``) is drawn from in C (its ``draws``), any
        other Generator as ``rng.random(N_UNIFORM)``, then ``rng.standard_normal(3)`` with PCA
        lighting: the same numbers for the same stream."""
        if type(rng) is SampleStream:
            uniforms, normals = rng.draws(self._pca)
            if self._pca and normals is None:  # recpipe._plan without numpy's sampler
                normals = rng.numpy_normals(self._uniforms)
        else:
            uniforms = rng.random(self._uniforms)
            normals = rng.standard_normal(3) if self._pca else None
        fields = self._plan.plan(self.options, uniforms, normals, height, width)
        if len(fields) == 3:
            raise self._error(*fields)
        return SamplePlan._make(fields)

    def _error(self, status, rows, cols):
        if status == self._plan.BAD_SIZE:
            return DecodeError(f"invalid image size {cols}x{rows}")
        if status == self._plan.UNDER_CROP:
            return DecodeError(f"image of {cols}x{rows} after resize/pad is smaller than "
                               f"max_crop_size={self.config.max_crop_size}")
        return DecodeError(f"image of {cols}x{rows} is too large to plan: a side after "
                           "resize/affine/pad would pass 2**31 - 1 pixels")
