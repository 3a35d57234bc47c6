"""Augmentation settings without effect (recpipe.decode.augment.effect): each rule of the table
is checked against the pixels (the setting given or left out: the same batches), warned once per
loader naming what disables it, and not warned where the setting does change the pixels."""

import warnings

import numpy as np
import pytest

from recpipe.decode.augment import AugmentConfig
from recpipe.decode.augment.config import TORCHVISION_CROP, with_torchvision_crop
from recpipe.decode.augment.effect import RULES, NoEffectWarning, no_effect
from recpipe.decode.loader import ImageLoader

from .._photos import pack_training_set

# rule -> (settings with the rule's setting, the same without it, words naming what disables
# it, settings where the same setting does change the pixels, and those without it)
CASES = {
    "random_resized_crop=True": (dict(random_resized_crop=True), {},
                                 "min_random_area=max_random_area=1 and max_aspect_ratio=0",
                                 dict(random_resized_crop=True, min_random_area=0.3), {}),
    "min_random_area/max_random_area": (dict(min_random_area=0.3), {},
                                        "random_resized_crop is False",
                                        dict(min_random_area=0.3, random_resized_crop=True),
                                        dict(random_resized_crop=True, max_aspect_ratio=0.2)),
    "rand_mirror=True": (dict(mirror=True, rand_mirror=True), dict(mirror=True), "mirror=True",
                         dict(rand_mirror=True), {}),
    "max_rotate_angle": (dict(rotate=30, max_rotate_angle=20), dict(rotate=30), "rotate=30",
                         dict(max_rotate_angle=20), {}),
    "rotate": (dict(rotate_list=(10, 20), rotate=30), dict(rotate_list=(10, 20)),
               "rotate_list=(10, 20)", dict(rotate=30), {}),
    "fill_value": (dict(fill_value=0), {}, "pad=0 and no affine warp",
                   dict(fill_value=0, pad=6, resize=40, rand_crop=True),
                   dict(pad=6, resize=40, rand_crop=True)),
}


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    url = tmp_path_factory.mktemp("effect") / "photos.rec"
    pack_training_set(url, 2, 6)
    return str(url)


def _pixels(rec, settings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ImageLoader(rec, 4, (3, 40, 40), threads=1, seed=3, **settings) as loader:
            batches = [np.array(images) for images, _ in loader]
    said = [str(w.message) for w in caught if issubclass(w.category, NoEffectWarning)]
    return np.concatenate(batches), said


def test_every_rule_has_a_case():
    assert sorted(rule.setting for rule in RULES) == sorted(CASES)


@pytest.mark.parametrize("setting", sorted(CASES))
def test_a_setting_without_effect_changes_nothing_and_is_warned_once(rec, setting):
    given, left_out, disabled_by, effective, effective_without = CASES[setting]
    pixels, said = _pixels(rec, given)
    expected, said_without = _pixels(rec, left_out)
    np.testing.assert_array_equal(pixels, expected)
    assert len(said) == 1 and not said_without, said
    assert said[0].startswith(f"{setting} has no effect: ") and disabled_by in said[0]


@pytest.mark.parametrize("setting", sorted(CASES))
def test_where_the_setting_changes_pixels_nothing_is_warned(rec, setting):
    _, _, _, effective, effective_without = CASES[setting]
    pixels, said = _pixels(rec, effective)
    other, _ = _pixels(rec, effective_without)
    assert not said
    assert not np.array_equal(pixels, other)


def test_the_warning_points_at_the_users_line(rec):
    with pytest.warns(NoEffectWarning, match=r"^random_resized_crop=True has no effect.*"
                                             r"min_random_area=0.08") as caught:
        ImageLoader(rec, 4, (3, 40, 40), threads=1, random_resized_crop=True).close()
    assert caught[0].filename == __file__


def test_mxnet_adapters_keep_mxnets_defaults_and_say_the_flag_does_nothing(rec):
    import recpipe.mx as mx  # recpipe.mx.record_iter's iterator, with or without MXNet

    with pytest.warns(NoEffectWarning, match="random_resized_crop=True has no effect"):
        it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 40, 40), batch_size=4,
                                   random_resized_crop=True, preprocess_threads=1)
    with it:
        config = it.loader.options.augment
        assert (config.min_random_area, config.max_aspect_ratio) == (1.0, 0.0)


def test_torchvision_defaults_fill_only_what_is_left_out():
    assert with_torchvision_crop({"rand_mirror": True}) == {"rand_mirror": True}
    assert with_torchvision_crop({"random_resized_crop": "False"}) == {
        "random_resized_crop": "False"}
    filled = with_torchvision_crop({"random_resized_crop": True})
    assert filled == {"random_resized_crop": True, **{k: v for k, v in TORCHVISION_CROP.items()
                                                      if k != "max_random_area"}}
    mine = with_torchvision_crop({"random_resized_crop": True, "min_random_area": 0.5,
                                  "max_aspect_ratio": 0.1})
    assert mine["min_random_area"] == 0.5 and "min_aspect_ratio" not in mine
    low = with_torchvision_crop({"random_resized_crop": True, "max_random_area": 0.05})
    assert low["min_random_area"] == 0.05  # never above the given maximum
    config = AugmentConfig.from_kwargs(data_shape=(3, 8, 8), **filled)
    assert config.random_resized_active and not no_effect(config)
