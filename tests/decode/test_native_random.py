"""A seeded randomized differential test over the whole native option space: thousands of
configurations drawn from the allow-list itself (every ``NATIVE_AUGMENT_FIELDS`` field, values
from tests/decode/native_diff.py's ``SPACE``, so a field another kernel adds to the allow-list is
drawn as soon as it is allowed: both layouts, every dtype with float16's subnormal and overflowing
scales, geometry, colour, normalisation), ``dct_scaling`` on and off, the region decoders with
``fast_dct``/``fast_upsample`` on and off, runs split over 1 or 2 concurrent ``fill`` calls, x
JPEG kinds (baseline 4:2:0/4:2:2/4:4:4, progressive, gray, restart markers, Exif/APP segments, odd
sizes, tiny images). Every sample ``recpipe._batch`` renders must equal the Python path's
pixels and label exactly; how many configurations and samples took the native path is recorded
(``record_property``, and the log) and bounded below.

``RECPIPE_DIFF_CONFIGS`` sets the number of configurations (default 2000, about 30 s on 2 shared
cores; e.g. 100000 for a long run). ``RECPIPE_DIFF_SEED`` changes the seed.
"""

import logging
import os
from collections import Counter

import numpy as np
import pytest

from recpipe._optional import extension
from recpipe.decode.decoders import available_decoders, get_decoder
from recpipe.decode.native import NATIVE_AUGMENT_FIELDS, augment_is_native
from recpipe.io.reader import RecordReader

from .native_diff import DEFAULTS, KINDS, native_and_python, pack_kinds, random_config

pytestmark = pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")
CONFIGURATIONS = int(os.environ.get("RECPIPE_DIFF_CONFIGS", "2000"))
SEED = int(os.environ.get("RECPIPE_DIFF_SEED", "2026"))
log = logging.getLogger(__name__)


def _region_decoders():
    """Every decoder whose regions the native path decodes, with fast_dct/fast_upsample."""
    found = []
    for name in ("libjpeg", "turbojpeg"):
        if name not in available_decoders():
            continue
        for fast_dct in (False, True):
            for fast_upsample in (False, True):
                decoder = get_decoder(name, fast_dct=fast_dct, fast_upsample=fast_upsample)
                if decoder.region_options() is not None:
                    found.append(decoder)
    return found


def _away_from_default(values):
    return {name for name, value in values.items()
            if name in DEFAULTS and value != DEFAULTS[name]}


def test_random_configurations_over_the_option_space(tmp_path, record_property):
    decoders = _region_decoders()
    if not decoders:
        pytest.skip("no decoder decodes regions with recpipe._batch")
    rng = np.random.default_rng(SEED)
    rec, kinds = pack_kinds(tmp_path / "kinds.rec", rng)
    tally, fields_native, kinds_native = Counter(), Counter(), Counter()
    with RecordReader(rec) as reader:
        for index in range(CONFIGURATIONS):
            values, config = random_config(rng, NATIVE_AUGMENT_FIELDS)
            if config is None:
                tally["refused by AugmentConfig"] += 1
                continue
            decoder = decoders[int(rng.integers(len(decoders)))]
            threads = 2 if rng.random() < 0.3 else 1
            seed, epoch = int(rng.integers(1 << 62)), int(rng.integers(4))
            out = native_and_python(reader, decoder, config, seed=seed, epoch=epoch,
                                    threads=threads)
            if out.native is None:
                tally["python path"] += 1
                continue
            assert augment_is_native(config), values  # the gate admits only the allow-list
            context = (f"configuration {index} (RECPIPE_DIFF_SEED={SEED}): {values}, {decoder!r}, "
                       f"seed={seed}, epoch={epoch}, threads={threads}")
            mismatches = out.mismatches()
            assert not mismatches, f"native != Python for records {mismatches}; {context}"
            done = np.flatnonzero(out.done)
            np.testing.assert_array_equal(out.labels[done], done.astype(np.float32),
                                          err_msg=context)
            tally["native path"] += 1
            tally["samples"] += len(out.done)
            tally["samples rendered by C"] += len(done)
            fields_native.update(_away_from_default(values))
            kinds_native.update(kinds[i] for i in done)
    summary = dict(tally, fields=dict(fields_native), kinds=dict(kinds_native))
    record_property("native_differential", summary)
    log.info("native differential over %d configurations: %s", CONFIGURATIONS, summary)
    # enough of the space took the native path, every allowed field and every kind among it
    assert tally["native path"] >= CONFIGURATIONS // 4, summary
    assert tally["samples rendered by C"] >= 0.6 * tally["samples"], summary  # tiny: Python
    if CONFIGURATIONS >= 500:
        allowed = NATIVE_AUGMENT_FIELDS & set(DEFAULTS)
        assert not allowed - set(fields_native), f"never drawn natively: {summary}"
        assert set(kinds_native) >= set(KINDS) - {"tiny"}, summary
