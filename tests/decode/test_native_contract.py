"""The native contract, field by field (beside test_native.py's gate tests): C plans with the
Python path's planner (csrc/plan/plan.h: the same slots and planning options); every field of
the allow-list, flipped to a value that changes the Python path's pixels, is rendered by C with
exactly those pixels; and a field added to a copy of
the allow-list without C support is caught by that same check (C ignores it, so its pixels are
the unflipped configuration's)."""

import dataclasses
import zlib

import numpy as np
import pytest

from recpipe._optional import extension, native
from recpipe.decode import native as native_gate
from recpipe.decode.augment import AugmentConfig, Augmenter
from recpipe.decode.augment import plan as planning
from recpipe.decode.decoders import available_decoders, get_decoder
from recpipe.decode.native import NATIVE_AUGMENT_FIELDS, run_options
from recpipe.io.reader import RecordReader

from . import native_diff
from .native_diff import DEFAULTS, draw_value, native_and_python, pack_kinds

batch = extension("_batch")
pytestmark = pytest.mark.skipif(batch is None, reason="recpipe._batch is not built")
BASE = dict(data_shape=(3, 40, 36))
# settings some fields act only beside (an aspect range needs a random-resized crop, fill_value
# a pad, a float normalisation float32 output); each is tried in turn
COMPANIONS = ({}, dict(random_resized_crop=True, min_random_area=0.4, max_aspect_ratio=1.4,
                       min_aspect_ratio=0.7),
              dict(random_resized_crop=True, min_random_area=0.4), dict(min_random_area=0.4),
              dict(resize=56, rand_crop=True), dict(pad=4), dict(pad=24, rand_crop=True),
              dict(dtype="float32", scale=0.5),
              dict(resize=80, min_crop_size=20, max_crop_size=60))  # random-size: both bounds
# C's names for slots that are not a plan.py U_<NAME> constant
DERIVED_SLOTS = {"rrc_tries": (planning.U_CROP - planning.U_RRC) // 4,
                 "crop_x": planning.U_CROP + 1, "crop_y": planning.U_CROP + 2,
                 "drawn": planning.N_UNIFORM}


def test_every_c_slot_is_a_planner_slot():
    """C plans with the Python path's planner: _batch's slots and the first of its option
    fields are recpipe._plan's (both built from csrc/plan/plan.h), and each slot is plan.py's
    ``U_<NAME>`` (or a derived one), so a slot added on either side is checked without editing
    this test."""
    plan = native("_plan")
    assert batch.DRAW_SLOTS and batch.DRAW_SLOTS == plan.DRAW_SLOTS
    assert batch.OPTION_FIELDS[:len(plan.OPTION_FIELDS)] == plan.OPTION_FIELDS
    for name, slot in batch.DRAW_SLOTS.items():
        expected = DERIVED_SLOTS[name] if name in DERIVED_SLOTS else \
            getattr(planning, f"U_{name.upper()}", None)
        assert expected is not None, f"C's slot {name!r} has no U_{name.upper()} in plan.py"
        assert slot == expected, name
    assert batch.DRAW_SLOTS["drawn"] == planning.N_UNIFORM


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(reader, decoder) over one JPEG of every kind."""
    name = next((n for n in ("libjpeg", "turbojpeg") if n in available_decoders()), None)
    if name is None or get_decoder(name).region_options() is None:
        pytest.skip("no decoder decodes regions with recpipe._batch")
    rec, _ = pack_kinds(tmp_path_factory.mktemp("kinds") / "kinds.rec",
                        np.random.default_rng(21), per_kind=1)
    with RecordReader(rec) as reader:
        yield reader, get_decoder(name)


def _config(**values):
    try:
        return AugmentConfig(**values)
    except (ValueError, NotImplementedError):
        return None


def _flips(field, reader, decoder, tries=6):
    """Yield ``(flipped, unflipped, affected)``: configurations (both through the gate) equal
    but for ``field`` away from its default, and the samples whose Python pixels that changes
    (a bool per record; at least one)."""
    rng = np.random.default_rng(zlib.crc32(field.encode()))
    _, h, w = BASE["data_shape"]
    for companions in COMPANIONS:
        unflipped = _config(**BASE, **companions)
        if unflipped is None or run_options(Augmenter(unflipped), decoder) is None:
            continue
        reference = native_and_python(reader, decoder, unflipped, seed=5, epoch=1).python
        for _ in range(tries):
            value = draw_value(field, rng, h, w)
            flipped = _config(**{**BASE, **companions, field: value})
            if (value == DEFAULTS[field] or flipped is None
                    or run_options(Augmenter(flipped), decoder) is None):
                continue
            python = native_and_python(reader, decoder, flipped, seed=5, epoch=1).python
            if python.dtype != reference.dtype or python.shape != reference.shape:
                affected = np.ones(len(python), bool)
            else:
                affected = np.array([a.tobytes() != b.tobytes()
                                     for a, b in zip(python, reference)])
            if affected.any():
                yield flipped, unflipped, affected


def _verdict(config, affected, reader, decoder):
    """``"equal"``: C rendered a sample ``affected`` marks, and every sample it rendered has
    the Python path's pixels; ``"differs"``: some sample C rendered does not; ``None``: C
    rendered none of the affected samples (nothing to conclude)."""
    out = native_and_python(reader, decoder, config, seed=5, epoch=1)
    assert out.native is not None, "the gate refused it"
    if out.mismatches():
        return "differs"
    return "equal" if (out.done & affected).any() else None


ALLOWED = sorted(NATIVE_AUGMENT_FIELDS & set(DEFAULTS))
OUTSIDE = sorted(set(DEFAULTS) - NATIVE_AUGMENT_FIELDS)


@pytest.mark.parametrize("field", ALLOWED)
def test_every_allowed_field_is_rendered_by_c_with_the_python_pixels(field, setup):
    reader, decoder = setup
    for flipped, _, affected in _flips(field, reader, decoder):
        verdict = _verdict(flipped, affected, reader, decoder)
        assert verdict != "differs", f"C's pixels differ from the Python path's: {flipped}"
        if verdict == "equal":
            return
    pytest.fail(f"no value of {field} tried changes pixels that C renders: give it a companion "
                "in COMPANIONS or a value in native_diff.SPACE")


@pytest.mark.parametrize("field", OUTSIDE)
def test_a_field_allowed_without_c_support_is_caught(field, setup, monkeypatch):
    """Put ``field`` (outside the allow-list: C does not render it) into a copy of the
    allow-list: the check above must fail for it."""
    reader, decoder = setup
    monkeypatch.setattr(native_gate, "NATIVE_AUGMENT_FIELDS", NATIVE_AUGMENT_FIELDS | {field})
    for flipped, unflipped, affected in _flips(field, reader, decoder):
        verdict = _verdict(flipped, affected, reader, decoder)
        if verdict is None:
            continue
        assert _verdict(unflipped, np.ones(len(affected), bool), reader, decoder) == "equal"
        assert verdict == "differs", (
            f"C rendered {field}={getattr(flipped, field)!r} with the Python pixels although "
            "it is not in NATIVE_AUGMENT_FIELDS: add it to the allow-list (with its C support)")
        return
    pytest.skip(f"{field} changes no pixels C renders when allowed alone (another gate limit "
                "refuses it, e.g. an affine step, or C leaves those samples to Python)")


def test_some_field_outside_the_allow_list_exercises_the_catch(setup, monkeypatch):
    """At least one field outside the allow-list reaches C when allowed, so the test above
    proves something (until C renders every field)."""
    if not OUTSIDE:
        pytest.skip("every AugmentConfig field is rendered by C")
    reader, decoder = setup
    caught = []
    for field in OUTSIDE:
        monkeypatch.setattr(native_gate, "NATIVE_AUGMENT_FIELDS", NATIVE_AUGMENT_FIELDS | {field})
        if any(_verdict(flipped, affected, reader, decoder) == "differs"
               for flipped, _, affected in _flips(field, reader, decoder, tries=2)):
            caught.append(field)
    if caught:
        return
    # nearly every field is native now (OUTSIDE: dct_scaling, which changes no pixels C
    # renders): prove the catch on a field whose C support is taken away instead (C is told
    # brightness 0, as a field C ignored would be)
    real = native_diff.run_options

    def without_brightness(augmenter, decoder, **keywords):
        options = real(augmenter, decoder, **keywords)
        return None if options is None else options._replace(brightness=0.0)

    monkeypatch.setattr(native_diff, "run_options", without_brightness)
    assert any(_verdict(flipped, affected, reader, decoder) == "differs"
               for flipped, _, affected in _flips("brightness", reader, decoder, tries=2)), \
        "a field C does not render went unnoticed"


def test_dataclass_fields_have_defaults_except_data_shape():
    """The field-by-field tests cover every field with a default; data_shape is the only
    required one (drawn by test_native_random.py)."""
    required = [f.name for f in dataclasses.fields(AugmentConfig)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    assert required == ["data_shape"]
