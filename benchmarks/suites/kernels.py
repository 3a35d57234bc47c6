"""recpipe's own C kernels against OpenCV:

- ``resize``: ``Augmenter.apply`` (resize, crop, mirror, layout, normalisation; no decode) on
  photos decoded once, with recpipe's kernels and with the OpenCV path (``Kernels.none()``),
  for train / val x uint8 / float32 normalised (NCHW), and train + colour jitter (0.4) where
  the OpenCV path also runs the jitter in NumPy; val also times the region decode each path
  asks for; each path's pixels are compared with MXNet's exact whole-image path
  (``dct_scaling=False``);
- ``interp``: ``csrc/kernels/interp.h``'s resizes (``interp`` of the kernels extension, with
  its SIMD loops and with its scalar ones alone) against ``cv2.resize`` on one OpenCV thread
  (with Intel IPP as the wheel has it, and with IPP off: for bicubic that is the Python path's
  resize), on the same random 3-channel images; the pixels equal cv2's with IPP off.
"""

import time

import numpy as np

from .. import data
from ..format import figure, fmt, fmt_ratio, ratio
from ..harness import Ratio, Suite, Table, suite

JITTER = dict(brightness=0.4, contrast=0.4, saturation=0.4)  # the usual ImageNet colour jitter
NORMALISE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12,
                 std_b=57.375)
INTERP_CASES = [  # (source h, w), (output h, w), method, what: the recipes' typical sizes
    ((400, 400), (256, 256), 3, "area, val's resize step (1.56x)"),
    ((512, 683), (256, 341), 3, "area, ~2x (general path)"),
    ((512, 682), (256, 341), 3, "area, exactly 2x (fast path)"),
    ((300, 400), (224, 224), 4, "Lanczos-4, a crop to 224"),
    ((300, 400), (224, 224), 0, "nearest, a crop to 224"),
    ((150, 150), (224, 224), 3, "area upscaled (bilinear emulation)"),
    ((375, 500), (256, 341), 2, "bicubic, val's resize step"),
    ((300, 400), (256, 341), 2, "bicubic, down 1.17x"),
    ((200, 150), (341, 256), 2, "bicubic, up 1.7x (9's pick)"),
]


def _configs():
    from recpipe.decode.bench import TRAIN, VAL

    return {"train uint8": (TRAIN, "uint8"), "train float32": (TRAIN, "float32"),
            "val uint8": (VAL, "uint8"), "val float32": (VAL, "float32"),
            "train+jitter float32": (dict(TRAIN, **JITTER), "float32")}


def augmenters(config, dtype):
    from recpipe.decode.augment import AugmentConfig, Augmenter, Kernels

    kwargs = dict(config, dtype=dtype, **(NORMALISE if dtype == "float32" else {}))
    return {"recpipe kernels": Augmenter(AugmentConfig(**kwargs)),
            "OpenCV path": Augmenter(AugmentConfig(**kwargs), kernels=Kernels.none()),
            "exact": Augmenter(AugmentConfig(**dict(kwargs, dct_scaling=False)))}


def prepare_samples(aug, dec, photos):
    """(pixels, plan, window) per photo, decoded the way ``aug`` asks."""
    from recpipe.decode.augment import sample_rng

    return [aug.decode_planned(dec, blob, sample_rng(0, 0, i)) for i, blob in enumerate(photos)]


def outputs(aug, samples):
    result = []
    for img, plan, window in samples:
        out = np.empty(aug.out_shape, aug.dtype)
        aug.apply(img, plan, out, window=window)
        result.append(out.astype(np.float64))
    return np.stack(result)


def interp_module():
    from recpipe._optional import extension

    for name in ("_kernels", "_batch"):
        module = extension(name)
        if module is not None and hasattr(module, "interp"):
            return module
    return None


@suite
class KernelsSuite(Suite):
    name = "kernels"
    title = "recpipe's C kernels against OpenCV: the render step and the resizes"
    grid = {"part": ("resize", "interp")}
    options = {"count": 200, "repeat": 10, "configs": ",".join(
        ("train uint8", "train float32", "val uint8", "val float32", "train+jitter float32"))}
    quick = {"count": 20, "repeat": 2, "configs": "val uint8"}
    repeats = 5
    warmup = 1

    def prepare(self):
        import cv2

        from recpipe.decode.decoders import get_decoder

        cv2.setNumThreads(1)
        self.photos = data.jpeg_blobs(self.options["count"])
        self.dec = get_decoder("auto")
        return {"description": f"resize: the first {len(self.photos)} photos, decoded once "
                               f"({self.dec.name}); interp: random 3-channel images (blurred "
                               "noise) of the recipes' typical sizes",
                "decoder": self.dec.name}

    def contenders(self, point):
        return self._resize() if point["part"] == "resize" else self._interp()

    def _resize(self):
        found = {}
        self.diffs = {}
        wanted = [c for c in self.options["configs"].split(",") if c]
        for name in wanted:
            config, dtype = _configs()[name]
            augs = augmenters(config, dtype)
            samples = {k: prepare_samples(a, self.dec, self.photos) for k, a in augs.items()}
            exact = outputs(augs["exact"], samples["exact"])
            gain = 1.0 if dtype == "uint8" else 1.0 / min(NORMALISE["std_r"],
                                                          NORMALISE["std_g"],
                                                          NORMALISE["std_b"])
            for path in ("recpipe kernels", "OpenCV path"):
                aug, these = augs[path], samples[path]
                diff = np.abs(outputs(aug, these) - exact)
                self.diffs[f"{name}: {path}"] = {"max": float(diff.max()) / gain,
                                                 "mean": float(diff.mean()) / gain}

                def apply(aug=aug, these=these, name=name):
                    out = np.empty(aug.out_shape, aug.dtype)
                    start = time.perf_counter()
                    for img, plan, window in these:
                        aug.apply(img, plan, out, window=window)
                    figures = {"apply_us": (time.perf_counter() - start) / len(these) * 1e6}
                    if name.startswith("val"):
                        start = time.perf_counter()
                        prepare_samples(aug, self.dec, self.photos)
                        figures["decode_us"] = ((time.perf_counter() - start)
                                                / len(self.photos) * 1e6)
                    return figures
                found[f"{name}: {path}"] = apply
        return found

    def _interp(self):
        import cv2

        from recpipe.image.opencv import ipp_off

        module = interp_module()
        if module is None:
            self.skip("interp", "the kernels extension (interp) is not built")
            return {}
        rng = np.random.default_rng(0)
        repeat, found = self.options["repeat"], {}
        self.interp_checked = {}
        for (h, w), (out_h, out_w), method, what in INTERP_CASES:
            img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (5, 5), 0)
            out = np.zeros((out_h, out_w, 3), np.uint8)

            def ours(simd=True, img=img, out=out, h=h, w=w, oh=out_h, ow=out_w, m=method):
                return module.interp((h, w, 3), img, (oh, ow), out, ow / w, oh / h, m, simd)

            def without_ipp(img=img, ow=out_w, oh=out_h, m=method):
                with ipp_off():
                    return cv2.resize(img, (ow, oh), interpolation=m)

            ours()
            self.interp_checked[what] = bool(np.array_equal(out, without_ipp()))

            def timed(call):
                def run():
                    start = time.perf_counter()
                    for _ in range(repeat):
                        call()
                    return {"ms": (time.perf_counter() - start) / repeat * 1e3}
                return run
            found[f"{what}: interp.h"] = timed(ours)
            found[f"{what}: interp.h scalar"] = timed(lambda o=ours: o(False))
            found[f"{what}: cv2"] = timed(lambda img=img, ow=out_w, oh=out_h, m=method:
                                          cv2.resize(img, (ow, oh), interpolation=m))
            found[f"{what}: cv2 IPP off"] = timed(without_ipp)
        return found

    def ratios(self, point):
        if point["part"] == "resize":
            return [Ratio(f"{name}: x faster", f"{name}: recpipe kernels", f"{name}: OpenCV path",
                          metric="apply_us", invert=True)
                    for name in self.options["configs"].split(",") if name]
        return [Ratio(f"{what}: interp.h / cv2", f"{what}: interp.h", f"{what}: cv2",
                      metric="ms") for _, _, _, what in INTERP_CASES]

    def facts(self, point):
        if point["part"] == "resize":
            return {"diff_vs_exact": getattr(self, "diffs", {})}
        return {"equal_to_cv2_ipp_off": getattr(self, "interp_checked", {})}

    @classmethod
    def tables(cls, result):
        parts = {p["params"]["part"]: p for p in result["points"]}
        tables = []
        p = parts.get("resize")
        if p:
            diffs = p["facts"].get("diff_vs_exact", {})
            rows = []
            for name in [c for c in result["options"]["configs"].split(",") if c]:
                ours, cv = f"{name}: recpipe kernels", f"{name}: OpenCV path"
                d_cv, d_ours = diffs.get(cv, {}), diffs.get(ours, {})
                rows.append([name, fmt(figure(p, cv, "apply_us"), 0),
                             fmt(figure(p, ours, "apply_us"), 0),
                             fmt_ratio(ratio(p, f"{name}: x faster")),
                             fmt(figure(p, cv, "decode_us"), 0) if name.startswith("val")
                             else "-",
                             fmt(figure(p, ours, "decode_us"), 0) if name.startswith("val")
                             else "-",
                             f"{d_cv.get('max', 0):.0f} / {d_cv.get('mean', 0):.3f}",
                             f"{d_ours.get('max', 0):.0f} / {d_ours.get('mean', 0):.3f}"])
            tables.append(Table(
                "The render step: recpipe's kernels against the OpenCV path (us a sample)",
                ["config", "OpenCV path apply", "recpipe apply", "x faster",
                 "OpenCV path region decode", "recpipe region decode",
                 "max / mean diff OpenCV path", "max / mean diff recpipe"], rows,
                notes="Diffs in pixel levels against `dct_scaling=False` (MXNet's exact "
                      "whole-image path)."))
        p = parts.get("interp")
        if p and p["contenders"]:
            checked = p["facts"].get("equal_to_cv2_ipp_off", {})
            rows = [[what, fmt(figure(p, f"{what}: interp.h", "ms"), 2),
                     fmt(figure(p, f"{what}: interp.h scalar", "ms"), 2),
                     fmt(figure(p, f"{what}: cv2", "ms"), 2),
                     fmt(figure(p, f"{what}: cv2 IPP off", "ms"), 2),
                     fmt_ratio(ratio(p, f"{what}: interp.h / cv2")),
                     "yes" if checked.get(what) else "NO"]
                    for _, _, _, what in INTERP_CASES]
            tables.append(Table(
                "csrc/kernels/interp.h against cv2.resize on one OpenCV thread (ms a resize)",
                ["case", "interp.h", "scalar", "cv2", "cv2 IPP off", "interp.h / cv2",
                 "pixels = cv2 IPP off"], rows))
        return tables
