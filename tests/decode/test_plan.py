"""recpipe._plan, the one planner both decode paths call (csrc/plan/plan.h): its arguments are
checked (TypeError/ValueError, never a crash), the images it cannot plan become the Python path's
DecodeErrors, each named draw slot is where the decision it names is read, and recpipe._batch
was built from the same planner (same slots, the same options first)."""

import dataclasses

import numpy as np
import pytest

from recpipe._optional import extension, native
from recpipe.decode.augment import AugmentConfig, Augmenter, sample_rng
from recpipe.decode.augment.plan import Planner, SamplePlan
from recpipe.errors import DecodeError

plan_module = native("_plan")
N = plan_module.DRAW_SLOTS["drawn"]
# every planning step on: rrc off (random-size crop instead), affine, pad, HLS, colour, PCA,
# normalisation jitter, drawn interpolations
EVERYTHING = dict(data_shape=(3, 24, 20), rand_crop=True, rand_mirror=True, brightness=0.3,
                  contrast=0.3, saturation=0.3, pca_noise=0.2, random_h=20, random_s=30,
                  random_l=30, max_rotate_angle=20, max_shear_ratio=0.2, max_random_scale=1.3,
                  min_random_scale=0.8, pad=3, inter_method=10, max_random_contrast=0.3,
                  max_random_illumination=10.0, mean_r=1.0)


def _plan(config, uniforms, normals=None, height=300, width=400):
    fields = plan_module.plan(Planner(config).options, np.asarray(uniforms, np.float64),
                              None if normals is None else np.asarray(normals, np.float64),
                              height, width)
    return SamplePlan._make(fields)


def _uniforms(seed=3):
    return np.random.default_rng(seed).random(N)


def test_the_option_fields_and_slots_are_one_table():
    config = AugmentConfig(**EVERYTHING)
    assert len(Planner(config).options) == len(plan_module.OPTION_FIELDS)
    assert plan_module.OPTION_FIELDS[:2] == ("out_h", "out_w")
    slots = plan_module.DRAW_SLOTS
    assert slots["drawn"] == 64 and slots["rrc"] + 4 * slots["rrc_tries"] <= slots["crop"]
    assert len(set(slots.values()) - {slots["rrc_tries"]}) == len(slots) - 1  # no slot shared


@pytest.mark.skipif(extension("_batch") is None, reason="recpipe._batch is not built")
def test_batch_plans_with_the_same_planner():
    batch = extension("_batch")
    assert batch.DRAW_SLOTS == plan_module.DRAW_SLOTS
    assert batch.OPTION_FIELDS[:len(plan_module.OPTION_FIELDS)] == plan_module.OPTION_FIELDS


def test_planner_plans_from_its_rngs_draws_in_order():
    """Planner.plan draws rng.random(64), then 3 standard normals with PCA lighting, nothing
    else: the plan is _plan.plan of those draws, and the stream goes on after them."""
    config = AugmentConfig(**EVERYTHING)
    rng, twin = sample_rng(7, 1, 5), sample_rng(7, 1, 5)
    plan = Planner(config).plan(300, 400, rng)
    uniforms = twin.random(N)
    assert plan == _plan(config, uniforms, twin.standard_normal(3))
    assert rng.random() == twin.random()
    plain = AugmentConfig(**{**EVERYTHING, "pca_noise": 0.0})
    rng, twin = sample_rng(7, 1, 5), sample_rng(7, 1, 5)
    assert Planner(plain).plan(300, 400, rng).pca is None
    twin.random(N)
    assert rng.random() == twin.random()


def _changes(config, slot, field, height=300, width=400):
    """True when moving uniform ``slot`` changes the plan's ``field`` (other slots fixed)."""
    u = _uniforms()
    normals = (0.1, -0.2, 0.3)
    before = getattr(_plan(config, u, normals, height, width), field)
    for value in (0.02, 0.37, 0.61, 0.98):
        u[slot] = value
        if getattr(_plan(config, u, normals, height, width), field) != before:
            return True
    return False


@pytest.mark.parametrize("name, offset, field, settings", [
    ("inter", 0, "inter", {}), ("inter", 2, "inter", {}),
    ("affine", 0, "affine", {}), ("affine", 1, "affine", {}), ("affine", 2, "affine", {}),
    ("affine", 3, "affine", dict(max_aspect_ratio=0.3)),
    ("affine", 4, "affine", dict(rotate_list=(0, 45, 90, 180))),
    ("crop", 0, "crop", dict(min_crop_size=10, max_crop_size=200)),
    ("crop_x", 0, "crop", {}), ("crop_y", 0, "crop", {}), ("mirror", 0, "mirror", {}),
    ("hls", 0, "hls", {}), ("hls", 2, "hls", {}), ("order", 0, "colour", {}),
    ("colour", 1, "colour", {}), ("norm", 0, "contrast", {}), ("norm", 1, "illumination", {}),
    ("rrc", 0, "crop", dict(random_resized_crop=True, min_random_area=0.2, rand_crop=False,
                            max_rotate_angle=0, max_shear_ratio=0.0, max_random_scale=1.0,
                            min_random_scale=1.0)),
])
def test_each_named_slot_is_where_its_decision_is_read(name, offset, field, settings):
    config = AugmentConfig(**{**EVERYTHING, **settings})
    assert _changes(config, plan_module.DRAW_SLOTS[name] + offset, field)


def test_an_unnamed_slot_changes_nothing():
    config = AugmentConfig(**{**EVERYTHING, "random_resized_crop": False})
    named = {plan_module.DRAW_SLOTS[k] for k in ("mirror", "crop_x", "crop_y")}
    spare = [s for s in range(plan_module.DRAW_SLOTS["rrc"], plan_module.DRAW_SLOTS["crop"])
             if s not in named]  # the random-resized crop's tries, which this config skips
    u = _uniforms()
    before = _plan(config, u, (0.1, -0.2, 0.3))
    u[spare] = 0.5
    assert _plan(config, u, (0.1, -0.2, 0.3)) == before


def test_bad_arguments_raise():
    options = Planner(AugmentConfig(**EVERYTHING)).options
    u, normals = _uniforms(), np.zeros(3)
    with pytest.raises(ValueError, match="uniforms must hold 64"):
        plan_module.plan(options, u[:63], normals, 10, 10)
    with pytest.raises(ValueError, match="uniforms must hold 64"):
        plan_module.plan(options, u.astype(np.float32), normals, 10, 10)
    with pytest.raises(TypeError):
        plan_module.plan(options, u.tolist(), normals, 10, 10)  # not a buffer
    with pytest.raises(ValueError, match="normals must hold 3"):
        plan_module.plan(options, u, None, 10, 10)  # pca_noise > 0
    with pytest.raises(ValueError, match="normals must hold 3"):
        plan_module.plan(options, u, np.zeros(4), 10, 10)
    with pytest.raises(TypeError, match="OPTION_FIELDS"):
        plan_module.plan(options[:-1], u, normals, 10, 10)
    with pytest.raises(TypeError, match="OPTION_FIELDS"):
        plan_module.plan(list(options), u, normals, 10, 10)
    fields = plan_module.OPTION_FIELDS
    for bad, error, message in ((dict(resize="large"), TypeError, "options.resize"),
                                (dict(rotate_list=[1, 2]), TypeError, "rotate_list"),
                                (dict(inter_method=7), ValueError, "inter_method"),
                                (dict(out_h=0), ValueError, "out_h"),
                                (dict(rrc=True, aspect_low=0.0), ValueError, "aspect"),
                                (dict(min_area=float("nan")), ValueError, "finite"),
                                (dict(random_h=1 << 60), ValueError, "random_h")):
        forced = tuple(bad.get(name, value) for name, value in zip(fields, options))
        with pytest.raises(error, match=message):
            plan_module.plan(forced, u, normals, 10, 10)
        with pytest.raises(error, match=message):
            plan_module.check(forced)
    with pytest.raises(OverflowError):
        plan_module.plan(options, u, normals, 1 << 70, 10)
    assert plan_module.check(options) is None


def test_the_planner_validates_its_options_once():
    config = AugmentConfig(data_shape=(3, 16, 16))
    object.__setattr__(config, "inter_method", 7)  # forced past AugmentConfig's validation
    with pytest.raises(ValueError, match="planner cannot take"):
        Planner(config)


@pytest.mark.parametrize("height, width", [(0, 10), (10, 0), (-3, 5)])
def test_an_invalid_size_is_a_decode_error(height, width):
    with pytest.raises(DecodeError, match=f"invalid image size {width}x{height}"):
        Augmenter(AugmentConfig(**EVERYTHING)).plan(height, width, sample_rng(1, 0, 0))


def test_an_image_under_max_crop_size_is_a_decode_error():
    config = AugmentConfig(data_shape=(3, 16, 16), min_crop_size=20, max_crop_size=50, pad=2)
    with pytest.raises(DecodeError, match=r"image of 64x44 after resize/pad is smaller than "
                                          r"max_crop_size=50"):
        Augmenter(config).plan(40, 60, sample_rng(1, 0, 0))
    assert 20 <= Augmenter(config).plan(46, 60, sample_rng(1, 0, 0)).crop[2] <= 50


def test_sizes_past_long_are_a_decode_error_not_an_overflow():
    config = AugmentConfig(data_shape=(3, 16, 16), max_random_scale=1e300, min_random_scale=1e300)
    with pytest.raises(DecodeError, match="too large to plan"):
        Augmenter(config).plan(60, 90, sample_rng(1, 0, 0))
    with pytest.raises(DecodeError, match="too large to plan"):
        Augmenter(AugmentConfig(data_shape=(3, 16, 16))).plan(1 << 40, 90, sample_rng(1, 0, 0))


def test_a_long_rotate_list_is_planned():
    """More angles than recpipe._batch takes (MAX_ROTATE_LIST): the Python path plans them."""
    angles = tuple(range(0, 300, 3))
    config = AugmentConfig(data_shape=(3, 16, 16), rotate_list=angles)
    seen = set()
    for index in range(40):
        (m00, m01, _), _ = Augmenter(config).plan(50, 60, sample_rng(2, 0, index)).affine[0]
        seen.add(round(float(np.degrees(np.arctan2(m01, m00)))) % 360)
    assert len(seen) > 20 and seen <= set(angles)


def test_resize_shorter_size_is_the_planners():
    from recpipe.decode.augment import resize_shorter_size

    config = AugmentConfig(data_shape=(3, 8, 8), resize=37)
    for height, width in ((300, 200), (200, 301), (5, 5), (1, 999)):
        expected = _plan(config, _uniforms(), None, height, width).resized_size
        assert resize_shorter_size(height, width, 37) == expected
    with pytest.raises(ValueError):
        resize_shorter_size(0, 5, 10)


def test_every_config_field_is_read_or_not_planning():
    """A field that changes planning is in Planner.options (the others are the renderer's)."""
    rendering = {"data_shape", "fill_value", "mean_r", "mean_g", "mean_b", "std_r", "std_g",
                 "std_b", "scale", "dtype", "layout", "dct_scaling", "random_resized_crop",
                 "min_aspect_ratio", "max_aspect_ratio", "min_random_area", "max_random_area"}
    base = AugmentConfig(**EVERYTHING)
    for field in dataclasses.fields(AugmentConfig):
        if field.name in rendering:
            continue
        value = getattr(base, field.name)
        changed = {"rand_crop": False, "mirror": True, "rand_mirror": False,
                   "rotate_list": (10, 20), "rotate": 30, "resize": 50, "max_crop_size": 30,
                   "min_crop_size": 20, "max_img_size": 100.0, "min_img_size": 10.0,
                   "inter_method": 3}.get(field.name)
        if changed is None:
            changed = value * 1.5 if isinstance(value, float) and value else \
                (value + 1 if isinstance(value, int) and not isinstance(value, bool) else 0.25)
        extra = {"min_crop_size": 20} if field.name == "max_crop_size" else \
            {"max_crop_size": 30} if field.name == "min_crop_size" else {}
        other = AugmentConfig(**{**EVERYTHING, **extra, field.name: changed})
        assert Planner(other).options != Planner(base).options, field.name
