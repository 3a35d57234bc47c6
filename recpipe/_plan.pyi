"""Type stubs of recpipe's planner (csrc/plan/plan_module.c, csrc/plan/plan.h): every random
decision of a sample, for both decode paths.

``options`` is ``recpipe.decode.augment.plan.Planner.options``: the tuple below lists its fields'
types in ``OPTION_FIELDS`` order, and ``OPTION_FIELDS`` is (tests/test_stubs.py checks these names
against the module's):

    out_h, out_w, resize, rand_crop, mirror, rand_mirror, rrc, min_area, max_area, aspect_low,
    aspect_high, brightness, contrast, saturation, max_contrast, max_illumination, pca_noise,
    random_h, random_s, random_l, affine, max_shear_ratio, max_rotate_angle, rotate, rotate_list,
    min_random_scale, max_random_scale, min_img_size, max_img_size, pad, inter_method,
    min_crop_size, max_crop_size
"""

from typing import Dict, Optional, Tuple

from typing_extensions import Buffer

OPTION_FIELDS: Tuple[str, ...]
DRAW_SLOTS: Dict[str, int]
BAD_SIZE: int  # plan's statuses: height or width <= 0
UNDER_CROP: int  # smaller than max_crop_size after resize/affine/pad
TOO_LARGE: int  # a size past 2**31 - 1
PCA_NATIVE: int  # 1 when numpy's normal sampler is linked: draws gives PCA lighting's normals

Options = Tuple[int, int, int, bool, bool, bool, bool, float, float, float, float, float, float,
                float, float, float, float, int, int, int, bool, float, int, int,
                Tuple[int, ...], float, float, float, float, int, int, int, int]

def plan(options: Options, uniforms: Buffer, normals: Optional[Buffer], height: int,
         width: int) -> tuple:
    """The fields of one sample's ``SamplePlan`` (in its order; the last is the C plan, as
    bytes), or ``(status, rows, cols)`` when the image cannot be planned (``BAD_SIZE``,
    ``UNDER_CROP``, ``TOO_LARGE``). ``uniforms``: 64 float64 read at ``DRAW_SLOTS``;
    ``normals``: None, or 3 float64 (with PCA lighting)."""

Box = Tuple[int, int, int, int]

def draws(key_lo: int, key_hi: int, sample: int, epoch: int,
          normals: bool) -> Tuple[bytes, Optional[bytes]]:
    """A sample's random draws (csrc/plan/draws.h, the ones ``recpipe._batch`` plans with):
    the first N_UNIFORM doubles of its Philox stream (numpy's
    ``Generator(Philox(key=key_hi << 64 | key_lo, counter=[0, 0, sample, epoch])).random``) as
    bytes of native float64, and when ``normals`` is true the 3 standard normals PCA lighting
    draws after them (numpy's ziggurat) as bytes of 3 float64, or None when ``PCA_NATIVE`` is 0.
    The four integers are taken modulo 2**64."""

def geometry(plan: bytes, out_h: int, out_w: int, pad: int, scales: int, dct_scaling: bool,
             resize_kernel: bool, den: int = ...) -> Tuple[int, Optional[Box]]:
    """``(den, box)``: the DCT scale 1/den to decode the planned sample at (``scales``: bits 1,
    2, 4 for the scales 1/2, 1/4, 1/8 offered; ``den`` given: that one) and the box (x0, y0,
    x1, y1) of that decode rendering reads, or None for the whole image (csrc/plan/geometry.h).
    ``plan``: the C plan (``plan``'s last field)."""

def resolve_inter(method: int, old_h: int, old_w: int, new_h: int, new_w: int) -> int:
    """MXNet's choice for ``inter_method`` 9 (auto) by the sizes: 2 (bicubic) when both sides
    grow, 3 (area) when both shrink, else 1 (bilinear); other methods as they are."""

def check(options: Options) -> None:
    """``options`` parsed and validated as ``plan`` does (TypeError/ValueError)."""
def resize_shorter(height: int, width: int, size: int) -> Tuple[int, int]:
    """MXNet's resize step: the shorter edge to ``size``, the other ``size * long // short``."""
