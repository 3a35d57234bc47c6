"""Type stubs of recpipe's libjpeg extension (csrc/batch/batch.c): the native run decoder
(``fill``) and the region decoder (``decode_region``, csrc/jpeg/region.h).

``options`` is a ``recpipe.decode.native.RunOptions``: the planner's options first
(``recpipe._plan.OPTION_FIELDS``, parsed by csrc/plan/plan.h's one table), then the run's. The
tuple below lists its fields' types in ``OPTION_FIELDS`` order (tests/decode/test_native.py
checks the two against each other), and ``OPTION_FIELDS`` is (tests/test_stubs.py checks these
names against the module's):

    out_h, out_w, resize, rand_crop, mirror, rand_mirror, rrc, min_area, max_area, aspect_low,
    aspect_high, brightness, contrast, saturation, max_contrast, max_illumination, pca_noise,
    random_h, random_s, random_l, affine, max_shear_ratio, max_rotate_angle, rotate, rotate_list,
    min_random_scale, max_random_scale, min_img_size, max_img_size, pad, inter_method,
    min_crop_size, max_crop_size, nchw, gains, offsets, label_width, fast_dct, fast_upsample,
    strict, max_pixels, max_bytes, check_rest, max_scans, scales, gain_r, gain_g, gain_b,
    channels, mean_r, mean_g, mean_b, fill_value, warp_lanes, id_labels
"""

from typing import Dict, List, Sequence, Tuple, Union

from typing_extensions import Buffer

OPTION_FIELDS: Tuple[str, ...]
DRAW_SLOTS: Dict[str, int]
LIBJPEG_TURBO_VERSION: int  # where the headers were libjpeg-turbo's
JPEG_LIB_VERSION: int
PCA_NATIVE: int  # 1 when built with numpy's normal sampler (PCA lighting without the GIL)

def fill(source: Union[int, Sequence[Tuple[Buffer, int]]], file_size: int, starts: Buffer,
         ends: Buffer, samples: Buffer, slots: Buffer, images: Buffer, labels: Buffer,
         status: Buffer, key_lo: int, key_hi: int, epoch: int,
         options: Tuple[int, int, int, bool, bool, bool, bool, float, float, float, float, float,
                        float, float, float, float, float, int, int, int, bool, float, int, int,
                        tuple, float, float, float, float, int, int, int, int, bool,
                        Tuple[float, float, float], Tuple[float, float, float], int, bool, bool,
                        bool, int, int, bool, int, int, float, float, float, int, float, float,
                        float, int, int, bool],
         sums: Buffer = b"", label_ids: Buffer = b"", label_values: Buffer = b"") -> int: ...
def uniforms(key_lo: int, key_hi: int, sample: int, epoch: int, count: int) -> List[float]: ...
def decode_region(data: Buffer, scale_num: int, scale_den: int, x0: int, y0: int, x1: int,
                  y1: int, channels: int, fast_dct: bool, fast_upsample: bool, strict: bool,
                  max_bytes: int, check_rest: bool = ...,
                  max_scans: int = ...) -> Tuple[bytearray, int, int, int, int, int, int, int]: ...
def colour_convert(code: int, pixels: Buffer, width: int) -> bytes: ...
def normals(key_lo: int, key_hi: int, sample: int, epoch: int) -> Tuple[float, float, float]: ...
def warp_affine(src: Buffer, height: int, width: int, channels: int,
                forward: Tuple[float, float, float, float, float, float], out_h: int, out_w: int,
                fill: int, lanes: int) -> bytes: ...
def interp(src_shape: Tuple[int, int, int], src: Buffer, dst_shape: Tuple[int, int], dst: Buffer,
           inv_x: float, inv_y: float, method: int, simd: bool = ...) -> bool: ...
