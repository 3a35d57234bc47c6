"""ImageRecordIter's augmentations, planned up front per sample and written straight into a batch.

The package: ``config`` (``AugmentConfig``: the keywords, parsed and validated), ``rng``
(per-sample random streams), ``plan`` (``Planner``: every random decision up front, made by
the one planner in C that both decode paths call),
``geometry`` (DCT scale, decode box, crop mapping), ``render`` (``Renderer``: pixels into a
batch slot, with the ``Kernels`` asked for) and ``effect`` (the table of settings that the other
settings leave without effect, warned once per loader); ``Augmenter`` joins them.

``AugmentConfig`` holds ImageRecordIter's augmentation keywords with MXNet 1.9.1's names and
defaults. ``Augmenter(config)`` then works in two steps per sample:

1. ``plan(height, width, rng)`` makes every random draw for the sample (crop box, mirror, colour
   factors and their order, PCA alpha, normalisation jitter, random interpolation) in a fixed
   order from one block of uniforms, so a sample's result depends only on its RNG, not on
   threads. The decisions are made by the one planner, in C (``csrc/plan/plan.h``), which this
   path calls through ``recpipe._plan`` and ``recpipe._batch`` calls for its runs: the two paths
   differ only in their kernels. ``decode_scale(plan, scales)`` then says how small a JPEG DCT scale
   the decode may use without losing output resolution, and ``decode_box(plan, scale)`` which pixels
   of that decode the sample reads; ``decode(decoder, data, plan)`` decodes just that (only the crop
   region with a region-decoding backend) and returns ``(pixels, window)``.
2. ``apply(img, plan, out, window=None)`` crops, resizes, mirrors, jitters, normalises and writes
   into ``out`` (a view into the batch buffer, ``(C, H, W)`` or ``(H, W, C)``), with OpenCV calls
   writing into ``out`` or small per-thread scratch buffers.

Order of operations (MXNet ``DefaultImageAugmenter::Process`` then the iterator's normalise):
resize the shorter edge to ``resize`` (other edge ``resize * long // short``) -> affine warp
(rotate/shear/random scale/aspect/img size clamps) -> ``pad`` -> crop: random-resized crop (up to
10 tries of area x aspect, each box resized to the output; if all fail, the final crop below),
or a random-size square crop (``min/max_crop_size``) resized to the output, or the final crop:
an image smaller than the output is first upscaled keeping its aspect, then the center (random
with ``rand_crop``) window of the output size is cut -> HLS shift -> brightness / contrast /
saturation in random order -> PCA lighting noise -> mirror -> ``(x - mean) * scale / std``
(with the optional ``max_random_contrast`` / ``max_random_illumination`` of ImageNormalizeParam)
-> RGB channel order. ``uint8`` output is raw pixels (like ImageRecordUInt8Iter), so mean/std/
scale must stay at their defaults then.

Where recpipe differs from MXNet (documented choices, RNG streams are ours anyway):
- the random-resized-crop aspect ratio is drawn log-uniformly in its range (torchvision / Gluon
  style); colour jitter runs in float32 with clipping to [0, 255] after each step instead of
  rounding to uint8 between steps;
- when the image was decoded at a reduced DCT scale, the planned crop box is mapped onto the
  smaller image and resized to the output in one step (instead of resize-then-crop), which is
  not bit-identical to the full-size path (the full-size path is, to OpenCV's own results).
- with ``dct_scaling`` on (the default), bilinear resizes (without affine warp or pad) run in
  the bilinear kernel straight into the batch: OpenCV's sampling positions and weights but
  float32 arithmetic, so pixels equal OpenCV's within 1 level (about 1 value in 8 differs, by
  1). A resize step followed by a plain crop (val: resize 256 + center crop) samples the crop's
  part of the whole image's resize grid, so the decoder only decodes the pixels the crop needs.
  ``dct_scaling=False`` keeps every resize on cv2.resize's own arithmetic: MXNet's pixels.
- every pixel is written by recpipe's kernel library (csrc/kernels/render.h, through
  ``recpipe._kernels``), the one ``recpipe._batch`` renders with: colour jitter and PCA noise
  run in float32 planes, equal to the NumPy steps above to float rounding.
- misspelled or unsupported keywords raise instead of being silently ignored.
"""

import numpy as np

from .config import AUGMENT_KEYWORDS, UNSUPPORTED_KEYWORDS, AugmentConfig
from .geometry import PAYING_SCALES, decode_box, decode_scale
from .plan import Planner, SamplePlan, resize_shorter_size
from .render import Kernels, Renderer
from .rng import SampleStream, sample_rng, sample_stream

__all__ = [
    "AUGMENT_KEYWORDS",
    "AugmentConfig",
    "Augmenter",
    "Kernels",
    "PAYING_SCALES",
    "SamplePlan",
    "SampleStream",
    "UNSUPPORTED_KEYWORDS",
    "resize_shorter_size",
    "sample_rng",
    "sample_stream",
]


class Augmenter:
    """Plans and applies one ``AugmentConfig`` to decoded images; shareable between threads.
    ``kernels``: which C kernels rendering may use (``Kernels``; default every built one)."""

    def __init__(self, config, kernels=None):
        self.config = config
        self.planner = Planner(config)
        self.renderer = Renderer(config, self.planner.options, kernels)
        self._channels = config.channels
        self._np_dtype = np.dtype(config.dtype)

    @property
    def kernels(self):
        """The ``Kernels`` this configuration uses."""
        return self.renderer.kernels

    @staticmethod
    def sample_rng(seed, epoch, index):
        """The stream of ``sample_rng(seed, epoch, index)`` as a ``SampleStream``: ``plan``
        draws from it in C (csrc/plan/draws.h, as ``recpipe._batch`` does); used as a Generator
        it is the calling thread's reused one (``thread_sample_rng``: valid until this thread's
        next call)."""
        return sample_stream(seed, epoch, index)

    @property
    def out_shape(self):
        """Shape of one sample in the batch: (C, H, W) or (H, W, C)."""
        c, h, w = self.config.data_shape
        return (c, h, w) if self.config.layout == "NCHW" else (h, w, c)

    @property
    def dtype(self):
        return self._np_dtype

    def plan(self, height, width, rng):
        """Draw everything for a ``height`` x ``width`` source image from ``rng``."""
        return self.planner.plan(height, width, rng)

    def decode_scale(self, plan, scales):
        """Smallest DCT scale in ``scales`` keeping the planned crop at output resolution
        (``geometry.decode_scale``)."""
        return decode_scale(self.config, plan, scales)

    def decode_box(self, plan, scale):
        """The box of the decode at ``scale`` that ``apply`` reads (``geometry.decode_box``)."""
        return decode_box(self.config, plan, scale, self.renderer.kernels.resize)

    def decode_planned(self, decoder, data, rng):
        """Plan a sample from its image header, then decode just what the plan needs.

        Returns ``(pixels, plan, window)``: pass them to ``apply(pixels, plan, out,
        window=window)``.
        """
        height, width = decoder.size(data)
        plan = self.plan(height, width, rng)
        img, window = self.decode(decoder, data, plan)
        return img, plan, window

    def decode(self, decoder, data, plan):
        """Decode ``data`` no more than ``plan`` needs: at ``decode_scale`` and, when the
        decoder decodes regions (``decoder.roi``), only ``decode_box``. Returns ``(pixels,
        window)`` for ``apply(pixels, plan, out, window=window)``; window is None after a
        whole-image decode."""
        scale = self.decode_scale(plan, decoder.scales)
        if decoder.roi:
            box = self.decode_box(plan, scale)
            if box is not None:
                return decoder.decode_region(data, box, scale=scale, channels=self._channels)
        return decoder.decode(data, scale=scale, channels=self._channels), None

    def apply(self, img, plan, out, window=None):
        """Write the augmented sample into ``out`` (``Renderer.apply``)."""
        self.renderer.apply(img, plan, out, window=window)
