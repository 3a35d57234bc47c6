"""The native batch path against hostile layouts and options (issue 20, item 9): it reads only
the record its head announces, and augmentation options that would overflow C's conversions are
refused (by ``AugmentConfig`` and again by the C argument check)."""

import math
import os

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode.augment.config import AugmentConfig
from recpipe.decode.loader import ImageLoader

needs_native = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch not built")


def _jpeg(value):
    return cv2.imencode(".jpg", np.full((24, 24, 3), value, np.uint8))[1].tobytes()


def _read_bytes():
    with open(f"/proc/{os.getpid()}/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@needs_native
@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/PID/io")
def test_unindexed_records_after_an_indexed_one_are_not_read(tmp_path):
    rec = str(tmp_path / "gaps.rec")
    filler = b"\0" * (4 << 20)
    with recpipe.RecordWriter(rec) as writer:
        for i in range(4):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), _jpeg(40 * i)))
            for _ in range(3):  # 12 MiB nobody indexed, before the next indexed record
                writer.write(filler, indexed=False)
    with ImageLoader(rec, 4, (3, 16, 16), threads=1, lookahead=False) as loader:
        assert loader.records.native
        before = _read_bytes()
        images, labels = next(iter(loader))
        read = _read_bytes() - before
    assert labels.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert read < (2 << 20), f"{read} bytes read for 4 small records"


@pytest.mark.parametrize("options", [
    dict(random_resized_crop=True, min_aspect_ratio=1e-300, max_aspect_ratio=1e300),
    dict(random_resized_crop=True, min_aspect_ratio=1e-9, max_aspect_ratio=1.0),
    dict(random_resized_crop=True, min_aspect_ratio=0.5, max_aspect_ratio=math.inf),
    dict(random_resized_crop=True, min_random_area=math.nan),
    dict(brightness=math.nan), dict(mean_r=math.inf, dtype="float32"), dict(max_rotate_angle=0,
                                                                          max_shear_ratio=math.inf),
    dict(resize=10 ** 12), dict(pad=1 << 20), dict(data_shape=(3, 16, 1 << 17))])
def test_options_that_would_overflow_are_refused(options):
    options = {"data_shape": (3, 16, 16), **options}
    with pytest.raises(ValueError):
        AugmentConfig(**options)


def test_sane_extreme_aspects_still_work():
    config = AugmentConfig(data_shape=(3, 16, 16), random_resized_crop=True,
                           min_aspect_ratio=1e-6, max_aspect_ratio=1e6)
    assert config.min_aspect_ratio == 1e-6


@needs_native
@pytest.mark.parametrize("low, high", [(1e-300, 1e300), (1e-6, 1e6)])
def test_the_c_check_refuses_what_the_config_would(tmp_path, low, high):
    """Planner options changed after validation (here forced: the planner packs the config
    once) meet the C argument check, or run within bounds: never a float-to-long overflow
    (UBSan in ci/sanitize.sh)."""
    rec = str(tmp_path / "a.rec")
    with recpipe.RecordWriter(rec) as writer:
        for i in range(8):
            writer.write(recpipe.pack(recpipe.IRHeader(0, float(i), i, 0), _jpeg(30 * i)))
    with ImageLoader(rec, 4, (3, 16, 16), threads=1, random_resized_crop=True,
                     min_aspect_ratio=0.5, max_aspect_ratio=2.0) as loader:
        planner = loader.records.augmenter.planner
        options = dict(zip(extension("_plan").OPTION_FIELDS, planner.options))
        options.update(aspect_low=low, aspect_high=high)
        planner.options = tuple(options.values())
        native = loader.records._native_options()
        if native is None:
            pytest.skip("this configuration is not rendered natively")
        loader.records._native = native
        try:
            batches = [labels.tolist() for _, labels in loader]
        except (ValueError, recpipe.DecodeError) as exc:
            assert low < 1e-6 and "aspect" in str(exc)
        else:
            assert low >= 1e-6 and sorted(sum(batches, [])) == [float(i) for i in range(8)]
