"""The OpenCV reference of recpipe's pixels: the renderer the Python path had before
recpipe's kernel library became the definition of both paths (cv2.resize, cv2.warpAffine,
cv2.cvtColor's HLS, cv2.addWeighted / multiply / add, NumPy's jitter for gray output, and the
bilinear kernel recpipe._resize and the colour kernel recpipe._colour where it used them), with
its geometry in Python. tests/decode/test_opencv_parity.py checks recpipe's renderer against it
on this machine: where another build of OpenCV computes otherwise, recpipe's pixels are its own
(the README says so)."""

import functools
import math
import threading
from dataclasses import dataclass

import numpy as np

from recpipe.decode import colour
from recpipe.decode import resize as fast_resize
from recpipe.decode.resize import Axis
from recpipe.image.opencv import load_cv2
from recpipe.image.opencv import resize as cv2_resize


def _taps_span(size, shift, scale, length):
    first = math.floor((shift + 0.5) * scale - 0.5)
    last = math.floor((size - 1 + shift + 0.5) * scale - 0.5) + 1
    return max(0, first - 1), min(length, last + 2)


def mapped_box(plan, full_h, full_w):
    """plan.source_box on an image of ``full_h x full_w`` (the source decoded at a DCT scale),
    rounded to whole pixels, at least one pixel, inside the image."""
    x0, y0, x1, y1 = plan.source_box
    src_h, src_w = plan.source_size
    fy, fx = full_h / src_h, full_w / src_w
    left = min(max(0, int(round(x0 * fx))), full_w - 1)
    top = min(max(0, int(round(y0 * fy))), full_h - 1)
    right = max(left + 1, min(full_w, int(round(x1 * fx))))
    bottom = max(top + 1, min(full_h, int(round(y1 * fy))))
    return left, top, right, bottom


def aligned_crop(plan, full_h, full_w):
    """((left, right, kx), (top, bottom, ky)): the part of a ``full_h x full_w`` decode that a
    plain crop of the resized image needs, starting at a pixel that maps (nearly) onto pixel
    (kx, ky) of the resized image."""
    x, y, w, h = plan.crop
    res_h, res_w = plan.resized_size
    return aligned_axis(x, w, full_w, res_w), aligned_axis(y, h, full_h, res_h)


@functools.lru_cache(maxsize=4096)
def aligned_axis(start, length, full, resized, budget=48):
    """(first, end, k) along one axis: the part starts at source pixel ``first`` ~= k * full /
    resized, the candidate k below ``start`` (at most ``budget`` source pixels further out;
    k = 0 is exact) whose grid position is nearest to a whole pixel; ``end`` reaches past the
    interpolation taps of the last needed pixel."""
    step = full / resized
    first, k, best = 0, 0, 1.0
    low = max(0, start - 3 - int(budget / step))
    for cand in range(start - 3, low - 1, -1):
        pos = cand * step
        err = abs(round(pos) - pos)
        if err < best:
            first, k, best = int(round(pos)), cand, err
            if err < 0.01:
                break
    end = min(full, first + int(math.ceil((start - k + length) * step)) + 3)
    return first, end, k


def resize_then_crop_box(plan, full_h, full_w):
    """(x0, y0, x1, y1): the pixels of a ``full_h x full_w`` decode that resizing it to
    ``plan.resized_size`` and keeping ``plan.crop`` samples (``fast_resize`` axes)."""
    x, y, w, h = plan.crop
    res_h, res_w = plan.resized_size
    top, bottom = _taps_span(h, y, full_h / res_h, full_h)
    left, right = _taps_span(w, x, full_w / res_w, full_w)
    return left, top, right, bottom


def is_linear(method, old_hw, new_hw):
    return resolve_inter(method, old_hw, new_hw) == 1  # cv2.INTER_LINEAR


def resolve_inter(method, old_hw, new_hw):
    """MXNet's GetInterMethod for 9 (auto); drawn values pass through."""
    if method != 9:
        return method
    if new_hw[0] > old_hw[0] and new_hw[1] > old_hw[1]:
        return 2
    if new_hw[0] < old_hw[0] and new_hw[1] < old_hw[1]:
        return 3
    return 1


def linear_axes(plan, img, window, out_hw):
    """``(y_axis, x_axis)`` for ``fast_resize.linear_into`` when what is left to do is a
    bilinear resize of part of the decoded image ``img`` (then mirror and normalise) into an
    ``out_hw`` output, else None:

    - resize step (maybe through a DCT scale), then a plain crop (val): the crop's part of
      the resize grid, sampled where resizing the whole image would sample it;
    - a crop resized to the output from a reduced-scale or windowed decode: the crop box
      mapped onto the decode (as the renderer's scaled region);
    - no resize step: the crop box, resized to the output (random-resized crop) or copied.
    MXNet's whole-image resize followed by a resized crop stays on the OpenCV path.
    """
    if plan.affine is not None or plan.upscale is not None:
        return None
    full = img.shape[:2] if window is None else (window[2], window[3])
    wx, wy = (window[0], window[1]) if window is not None else (0, 0)
    resized = plan.resized_size != plan.source_size
    if not plan.resize_crop and (resized or full != plan.source_size):
        if not is_linear(plan.inter[0], full, plan.resized_size):
            return None
        (res_h, res_w), (x, y) = plan.resized_size, plan.crop[:2]
        return (Axis(-wy, full[0], y, full[0] / res_h),
                Axis(-wx, full[1], x, full[1] / res_w))
    if plan.resize_crop and (full != plan.source_size or (window is not None and resized)):
        left, top, right, bottom = mapped_box(plan, *full)
        box = (bottom - top, right - left)
        if not is_linear(plan.inter[2], box, out_hw):
            return None
        return (Axis(top - wy, box[0], 0.0, box[0] / out_hw[0]),
                Axis(left - wx, box[1], 0.0, box[1] / out_hw[1]))
    if resized:
        return None
    x, y, w, h = plan.crop
    if plan.resize_crop and not is_linear(plan.inter[2], (h, w), out_hw):
        return None
    return (Axis(y - wy, h, 0.0, h / out_hw[0]),
            Axis(x - wx, w, 0.0, w / out_hw[1]))


# upscaled images up to this size are made as MXNet does (resize all, then crop); larger ones
# are cropped first (Renderer._upscaled_crop)
EXACT_UPSCALE_PIXELS = 16 << 20
_GRAY_WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)


@dataclass(frozen=True)
class Kernels:
    """Which of recpipe's C kernels rendering may use: ``resize`` (``recpipe._resize``:
    bilinear resize, mirror and normalisation straight into the batch) and ``colour``
    (``recpipe._colour``: colour jitter, PCA noise, mirror and normalisation in one pass). Both
    are always built (they need only a C compiler): ``Kernels.available()`` uses them (the
    default); ``Kernels.none()`` is the pure OpenCV and NumPy reference."""

    resize: bool = True
    colour: bool = True

    @classmethod
    def available(cls):
        return cls(resize=True, colour=True)

    @classmethod
    def none(cls):
        return cls(resize=False, colour=False)


class _Scratch(threading.local):
    """Per-thread reusable buffers keyed by (name, shape, dtype)."""

    def __init__(self):
        self.buffers = {}

    def get(self, name, shape, dtype):
        key = (name, shape, dtype)
        buf = self.buffers.get(key)
        if buf is None:
            buf = self.buffers[key] = np.empty(shape, dtype=dtype)
        return buf




class ReferenceRenderer:
    """Writes planned samples of one ``AugmentConfig`` into batch slots; shareable between
    threads. ``kernels`` (``Kernels``, default every built one) are used where they apply: the
    resize kernel only with ``dct_scaling`` and without affine warp or pad, the colour kernel
    for 3-channel output (float16: the kernel's float32 values, then OpenCV's float16
    arithmetic, as ``recpipe._batch`` writes them)."""

    def __init__(self, config, kernels=None):
        """(kernels: the C kernels the old renderer used where they applied: default both)"""
        cv2 = load_cv2()
        kernels = Kernels.available() if kernels is None else kernels
        self._cv2 = cv2
        self.config = c = config
        self._out_h, self._out_w = c.out_hw
        self._channels = c.channels
        self._scratch = _Scratch()
        has_colour = bool(c.brightness or c.contrast or c.saturation)
        has_hls = bool(c.random_h or c.random_s or c.random_l)
        self._needs_float = has_colour or c.pca_noise > 0
        means = (c.mean_r, c.mean_g, c.mean_b)[:self._channels]
        stds = (c.std_r, c.std_g, c.std_b)[:self._channels]
        self._means = tuple(float(m) for m in means)
        self._gains = tuple(float(c.scale) / float(s) for s in stds)
        self.fixed_terms = (list(self._gains),
                            [-m * g for m, g in zip(self._means, self._gains)])
        self._cv_depth = {"uint8": cv2.CV_8U, "float32": cv2.CV_32F, "float16": cv2.CV_16F}[c.dtype]
        self._np_dtype = np.dtype(c.dtype)
        self.out_shape = (c.channels,) + c.out_hw if c.layout == "NCHW" else \
            c.out_hw + (c.channels,)
        # the kernels that apply to this configuration: bilinear resizes in C
        # (geometry.linear_axes), colour jitter in C (_write_float_path)
        self.kernels = Kernels(
            resize=kernels.resize and c.dct_scaling and not c.affine_active and not c.pad,
            colour=kernels.colour and self._channels == 3
            and c.dtype in ("uint8", "float32", "float16"))
        # when nothing but mirror and normalisation follows a bilinear resize: straight into
        # the batch
        self.direct = (self.kernels.resize and not self._needs_float and not has_hls
                       and c.dtype in ("uint8", "float32"))

    def apply(self, img, plan, out, window=None):
        """Write the augmented sample into ``out`` (shape ``out_shape``, config dtype).

        ``img`` is the whole decoded image, or with ``window = (x, y, full_height, full_width)``
        (a ``decoders.Window``) the part of a ``full_height x full_width`` decode starting at
        (x, y) that covers ``decode_box``.
        """
        if out.shape != self.out_shape or out.dtype != self._np_dtype:
            raise ValueError(f"out must have shape {self.out_shape} and dtype {self._np_dtype}, "
                             f"got {out.shape} {out.dtype}")
        img = self._match_channels(img)
        axes = linear_axes(plan, img, window, (self._out_h, self._out_w)) \
            if self.kernels.resize else None
        if axes is not None and self.direct:
            gains, offsets = self._output_terms(plan)
            region = self._unscaled_region(img, axes)
            if region is not None:  # nothing to resample: one pass, no interpolation
                scratch = self._scratch.get("colour", (3 * region.shape[0] * region.shape[1],),
                                            np.float32)
                colour.jitter_into(region, out, (), None, scratch, mirror=plan.mirror,
                                   nchw=self.config.layout == "NCHW", gains=gains,
                                   offsets=offsets)
                return
            fast_resize.linear_into(img, out, *axes, mirror=plan.mirror,
                                    nchw=self.config.layout == "NCHW", gains=gains,
                                    offsets=offsets)
            return
        if axes is not None:
            region = self._region_buffer()
            fast_resize.linear_into(img, region, *axes, nchw=False)
        else:
            region = self._region(img, plan, window)
        if plan.hls is not None:
            region = self._shift_hls(region, plan.hls)
        if self._needs_float:
            self._write_float_path(region, plan, out)
        else:
            self._write(region, plan, out)

    def _unscaled_region(self, img, axes):
        """The part of ``img`` that ``axes`` copy one to one (a crop the size of the output,
        e.g. a 112x112 face), when the fused colour writer can write it; else None."""
        y_axis, x_axis = axes
        if (self._channels != 3 or not self.kernels.colour or y_axis.scale != 1.0
                or x_axis.scale != 1.0 or y_axis.shift or x_axis.shift
                or (y_axis.length, x_axis.length) != (self._out_h, self._out_w)):
            return None
        y, x = int(y_axis.offset), int(x_axis.offset)
        if y != y_axis.offset or x != x_axis.offset or y < 0 or x < 0 \
                or y + self._out_h > img.shape[0] or x + self._out_w > img.shape[1]:
            return None
        return img[y:y + self._out_h, x:x + self._out_w]

    def _region(self, img, plan, window):
        """The output-sized crop (H, W, C) uint8, before colour, mirror and normalisation."""
        full = img.shape[:2] if window is None else (window[2], window[3])
        # an upscaled crop (a resize below the output) takes MXNet's steps on the reduced-scale
        # decode: its crop lies in the upscaled image, not in the resized one
        if plan.affine is None and not self.config.pad and plan.upscale is None and (
                full != plan.source_size
                or (window is not None and plan.resized_size != plan.source_size)):
            region = None
            if not plan.resize_crop and self.config.dct_scaling:
                region = self._aligned_region(img, plan, full, window)
            if region is None:
                region = self._scaled_region(img, plan, full, window)
            return region
        return self._exact_region(img, plan, window)

    def _match_channels(self, img):
        cv2 = self._cv2
        if img.ndim == 2:
            img = img[:, :, None]
        have = img.shape[2]
        if have == self._channels:
            return img
        if self._channels == 1:
            code = cv2.COLOR_RGBA2GRAY if have == 4 else cv2.COLOR_RGB2GRAY
            return cv2.cvtColor(img, code)[:, :, None]
        if have == 1:
            return cv2.cvtColor(img, cv2.COLOR_GRAY2RGB)
        return np.ascontiguousarray(img[:, :, :3])

    def _resize(self, src, size_hw, method, dst=None):
        inter = resolve_inter(method, src.shape[:2], size_hw)
        out = cv2_resize(src, (size_hw[1], size_hw[0]), dst=dst, interpolation=inter)
        return out if out.ndim == 3 else out[:, :, None]

    def _exact_region(self, img, plan, window=None):
        """MXNet's steps on the full-size image: resize, warp, pad, upscale, crop(, resize).
        With a window, only the plain crop(, resize) case is possible (see decode_box)."""
        x, y, w, h = plan.crop
        if window is not None and (window[0] or window[1] or img.shape[:2] != plan.source_size):
            if plan.upscale is not None or plan.resized_size != plan.source_size:
                raise ValueError("this plan needs the whole image, not a window")
            x -= window[0]
            y -= window[1]
            if x < 0 or y < 0 or x + w > img.shape[1] or y + h > img.shape[0]:
                raise ValueError(f"window {tuple(window)} of shape {img.shape[:2]} does not "
                                 f"cover the crop {plan.crop}")
            region = img[y:y + h, x:x + w]
        else:
            region = self._full_image_crop(img, plan)
        if plan.resize_crop:
            region = self._resize(region, (self._out_h, self._out_w), plan.inter[2],
                                  dst=self._region_buffer())
        return region

    def _full_image_crop(self, img, plan):
        cv2 = self._cv2
        work = img
        if work.shape[:2] != plan.resized_size:
            work = self._resize(work, plan.resized_size, plan.inter[0])
        if plan.affine is not None:
            matrix, (new_h, new_w) = plan.affine
            inter = resolve_inter(plan.inter[1], work.shape[:2], (new_h, new_w))
            fill = (self.config.fill_value,) * 3
            work = cv2.warpAffine(work, np.array(matrix, dtype=np.float32), (new_w, new_h),
                                  flags=inter, borderMode=cv2.BORDER_CONSTANT, borderValue=fill)
            work = work if work.ndim == 3 else work[:, :, None]
        if self.config.pad:
            pad, fill = self.config.pad, (self.config.fill_value,) * 3
            work = cv2.copyMakeBorder(work, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=fill)
            work = work if work.ndim == 3 else work[:, :, None]
        if plan.upscale is not None:
            up_h, up_w = plan.upscale
            if up_h * up_w > EXACT_UPSCALE_PIXELS:
                return self._upscaled_crop(work, plan)
            work = self._resize(work, plan.upscale, plan.inter[2])
        x, y, w, h = plan.crop
        return work[y:y + h, x:x + w]

    def _upscaled_crop(self, work, plan):
        """The crop of the upscaled image, computed from the source alone: each output pixel
        samples the source where ``cv2.resize`` to ``plan.upscale`` would (``(d + 0.5) / f -
        0.5``), so work and memory are the output's, not the upscaled image's (a 1x65500 image
        upscaled to 224 rows would be 3.3 gigapixels). Values are within a level or two of the
        full resize (warpAffine's 5-bit interpolation weights)."""
        cv2 = self._cv2
        (up_h, up_w), (h, w) = plan.upscale, work.shape[:2]
        x, y, out_w, out_h = plan.crop
        fx, fy = w / up_w, h / up_h
        matrix = np.array([[fx, 0.0, (x + 0.5) * fx - 0.5], [0.0, fy, (y + 0.5) * fy - 0.5]],
                          dtype=np.float64)
        inter = plan.inter[2] if plan.inter[2] in (cv2.INTER_NEAREST, cv2.INTER_CUBIC) else \
            cv2.INTER_LINEAR
        out = cv2.warpAffine(work, matrix, (out_w, out_h), flags=inter | cv2.WARP_INVERSE_MAP,
                             borderMode=cv2.BORDER_REPLICATE)
        return out if out.ndim == 3 else out[:, :, None]

    def _aligned_region(self, img, plan, full, window=None):
        """Resize-then-crop on part of the image (a plain crop of a resized image, as val's
        resize + center crop): the part starts where the resize grid nearly meets a source
        pixel (_aligned_crop), so resizing it with the whole image's factors samples the same
        positions (to ~0.05 px) as resizing the whole image. None if it does not fit."""
        full_h, full_w = full
        (left, right, kx), (top, bottom, ky) = aligned_crop(plan, full_h, full_w)
        ox, oy = (window[0], window[1]) if window is not None else (0, 0)
        left, right, top, bottom = left - ox, right - ox, top - oy, bottom - oy
        if left < 0 or top < 0 or right > img.shape[1] or bottom > img.shape[0]:
            return None
        res_h, res_w = plan.resized_size
        inter = resolve_inter(plan.inter[0], (full_h, full_w), (res_h, res_w))
        part = cv2_resize(img[top:bottom, left:right], None, fx=res_w / full_w,
                          fy=res_h / full_h, interpolation=inter)
        part = part if part.ndim == 3 else part[:, :, None]
        x, y, w, h = plan.crop
        x, y = x - kx, y - ky
        if x < 0 or y < 0 or x + w > part.shape[1] or y + h > part.shape[0]:
            return None
        return part[y:y + h, x:x + w]

    def _scaled_region(self, img, plan, full=None, window=None):
        """The planned box mapped onto a reduced-scale (``full`` = its size) decode or a window
        of one, resized to the output at once."""
        full_h, full_w = full or img.shape[:2]
        left, top, right, bottom = mapped_box(plan, full_h, full_w)
        if window is not None:
            left, right = left - window[0], right - window[0]
            top, bottom = top - window[1], bottom - window[1]
            if left < 0 or top < 0 or right > img.shape[1] or bottom > img.shape[0]:
                raise ValueError(f"window {tuple(window)} of shape {img.shape[:2]} does not "
                                 f"cover the mapped crop")
        method = plan.inter[2] if plan.resize_crop else plan.inter[0]
        return self._resize(img[top:bottom, left:right], (self._out_h, self._out_w), method,
                            dst=self._region_buffer())

    def _region_buffer(self):
        return self._scratch.get("region", (self._out_h, self._out_w, self._channels), np.uint8)

    def _shift_hls(self, region, shifts):
        cv2 = self._cv2
        hls = cv2.cvtColor(region, cv2.COLOR_RGB2HLS).astype(np.int16)
        dh, ds, dl = shifts
        for channel, delta, limit in ((0, dh, 180), (1, dl, 255), (2, ds, 255)):
            if delta:
                np.clip(hls[:, :, channel] + delta, 0, limit, out=hls[:, :, channel])
        return cv2.cvtColor(hls.astype(np.uint8), cv2.COLOR_HLS2RGB)

    # ------------------------------------------------------------------- writing into the batch

    def _planes(self, out):
        return [out[i] for i in range(self._channels)]

    def _write(self, region, plan, out):
        """uint8 region (H, W, C) -> mirror -> normalise -> out."""
        cv2 = self._cv2
        nchw = self.config.layout == "NCHW"
        if plan.mirror:
            flipped = self._scratch.get("flip", region.shape, np.uint8)
            region = cv2.flip(region, 1, dst=flipped)
            region = region if region.ndim == 3 else region[:, :, None]
        elif nchw and not region.flags.c_contiguous:
            # cv2.split on a strided view takes a slow path (~20x): compact the crop first
            compact = self._scratch.get("compact", region.shape, np.uint8)
            np.copyto(compact, region)
            region = compact
        if self._np_dtype == np.uint8:
            if not nchw:
                np.copyto(out, region)
            elif self._channels == 1:
                np.copyto(out[0], region[:, :, 0])
            else:
                cv2.split(region, self._planes(out))
            return
        gains, offsets = self._affine_terms(plan)
        if nchw:
            planes = (cv2.split(region, self._scratch_planes(np.uint8)) if self._channels == 3
                      else [region[:, :, 0]])
            for src, dst, k, b in zip(planes, self._planes(out), gains, offsets):
                cv2.addWeighted(src, k, src, 0.0, b, dst=dst, dtype=self._cv_depth)
        else:
            tmp = self._scratch.get("hwc32", region.shape, np.float32)
            cv2.multiply(region, _scalar(gains), dst=tmp, dtype=cv2.CV_32F)
            cv2.add(tmp, _scalar(offsets), dst=out.reshape(region.shape), dtype=self._cv_depth)

    def _scratch_planes(self, dtype):
        return [self._scratch.get(f"plane{i}", (self._out_h, self._out_w), dtype)
                for i in range(self._channels)]

    def _affine_terms(self, plan):
        """Per-channel k, b with out = x * k + b: (x - mean) * contrast * gain + illum * gain."""
        if plan.contrast == 1.0 and plan.illumination == 0.0:
            return self.fixed_terms
        gains = [g * plan.contrast for g in self._gains]
        offsets = [-m * k + plan.illumination * g
                   for m, k, g in zip(self._means, gains, self._gains)]
        return gains, offsets

    def _output_terms(self, plan):
        """(gains, offsets) for the C writers: the normalisation of float output, none for uint8."""
        return self._affine_terms(plan) if self._np_dtype != np.uint8 else (None, None)

    def _write_float_path(self, region, plan, out):
        """Colour jitter and PCA noise in float32, then mirror, normalise and write."""
        scratch = self._scratch.get("colour", (3 * region.shape[0] * region.shape[1],),
                                    np.float32) if self.kernels.colour else None
        if self.kernels.colour and self._np_dtype != np.float16:
            gains, offsets = self._output_terms(plan)
            colour.jitter_into(region, out, plan.colour, plan.pca, scratch, mirror=plan.mirror,
                               nchw=self.config.layout == "NCHW", gains=gains, offsets=offsets)
            return
        cv2 = self._cv2
        pixels = self._scratch.get("jitter", region.shape, np.float32)
        if self.kernels.colour:  # float16: the colour kernel's float32 values, mirrored
            colour.jitter_into(region, pixels, plan.colour, plan.pca, scratch,
                               mirror=plan.mirror, nchw=False)
        else:
            pixels = self._jittered(region, plan, pixels)
        if self._np_dtype == np.uint8:
            rounded = cv2.convertScaleAbs(pixels)
            self._write(rounded if rounded.ndim == 3 else rounded[:, :, None],
                        plan._replace(mirror=False), out)
            return
        gains, offsets = self._affine_terms(plan)
        if self.config.layout == "NCHW":
            planes = (cv2.split(pixels) if self._channels == 3 else [pixels[:, :, 0]])
            for src, dst, k, b in zip(planes, self._planes(out), gains, offsets):
                cv2.addWeighted(src, k, src, 0.0, b, dst=dst, dtype=self._cv_depth)
        else:
            cv2.multiply(pixels, _scalar(gains), dst=pixels)
            cv2.add(pixels, _scalar(offsets), dst=out.reshape(region.shape), dtype=self._cv_depth)

    def _jittered(self, region, plan, pixels):
        """NumPy's colour jitter and PCA noise of ``region`` in ``pixels`` (float32), mirrored."""
        np.copyto(pixels, region)
        for op, alpha in plan.colour:
            self._jitter(pixels, op, alpha)
        if plan.pca is not None:
            pixels += np.asarray(plan.pca, dtype=np.float32)
            np.clip(pixels, 0, 255, out=pixels)
        if plan.mirror:
            pixels = self._cv2.flip(pixels, 1)
            pixels = pixels if pixels.ndim == 3 else pixels[:, :, None]
        return pixels

    @staticmethod
    def _jitter(pixels, op, alpha):
        if op == 0:  # brightness
            pixels *= alpha
        else:
            gray = pixels @ _GRAY_WEIGHTS if pixels.shape[2] == 3 else pixels[:, :, 0]
            if op == 1:  # contrast: blend with the mean gray level
                pixels *= alpha
                pixels += (1.0 - alpha) * float(gray.mean())
            else:  # saturation: blend with the per-pixel gray
                pixels *= alpha
                pixels += ((1.0 - alpha) * gray)[:, :, None]
        np.clip(pixels, 0, 255, out=pixels)


def _scalar(values):
    """A cv2 per-channel scalar (4-tuple) from 1 or 3 values."""
    values = [float(v) for v in values]
    return tuple(values + [0.0] * (4 - len(values)))
