"""The native contract (recpipe.decode.native): C's option names and uniform slots equal the
Python side's, the .pyi agrees with them, and the gate is an allow-list: any AugmentConfig field
outside it, away from its default, sends runs to the Python path."""

import dataclasses

import numpy as np
import pytest

from recpipe._optional import extension
from recpipe.decode.augment import AugmentConfig, Augmenter
from recpipe.decode.augment import plan as planning
from recpipe.decode.decoders import get_decoder
from recpipe.decode.native import (NATIVE_AUGMENT_FIELDS, RunOptions, augment_is_native,
                                   run_options)

batch = extension("_batch")
native = pytest.mark.skipif(batch is None, reason="recpipe._batch is not built")
BASE = dict(data_shape=(3, 64, 64))


@native
def test_c_option_fields_are_the_run_description():
    assert batch.OPTION_FIELDS == RunOptions._fields


@native
def test_c_draw_slots_are_the_planner_slots():
    tries = (planning.U_CROP - planning.U_RRC) // 4  # 4 uniforms a random-resized-crop try
    assert batch.DRAW_SLOTS == {
        "rrc": planning.U_RRC, "rrc_tries": tries, "crop_x": planning.U_CROP + 1,
        "crop_y": planning.U_CROP + 2, "mirror": planning.U_MIRROR, "order": planning.U_ORDER,
        "colour": planning.U_COLOUR, "drawn": planning.N_UNIFORM, "hls": planning.U_HLS,
        "norm": planning.U_NORM, "affine": planning.U_AFFINE, "inter": planning.U_INTER,
        "crop": planning.U_CROP}


def _candidates(field):
    """Values other than ``field``'s default to try (the first valid one is used)."""
    default = field.default
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default + 1, default + 8, 1, 4, 90]
    if isinstance(default, float):
        return [default + 0.5, 0.5, 1.5, 0.1, default * 2]
    if isinstance(default, str):
        return ["uint8", "float16", "NHWC", "NCHW"]
    if isinstance(default, tuple):
        return [(90,), (90, 180)]
    if default is None:
        return [0.5, 1.0]
    raise AssertionError(f"no candidate values for {field.name} = {default!r}: add some")


# native settings some fields need beside them (e.g. min_aspect_ratio: an aspect range)
COMPANIONS = ({}, dict(random_resized_crop=True, min_random_area=0.5, max_aspect_ratio=0.5))
# fields valid only beside another field outside the allow-list (a random-size crop's bounds)
PAIRED = {"min_crop_size": dict(max_crop_size=64), "max_crop_size": dict(min_crop_size=32)}


def _flipped(field):
    """``(config with field away from its default, the same config with field at default)``
    (None for a PAIRED field: it is valid only beside another field outside the allow-list)."""
    for companions in COMPANIONS + ((PAIRED[field.name],) if field.name in PAIRED else ()):
        for value in _candidates(field):
            if value == field.default:
                continue
            try:
                flipped = AugmentConfig(**dict(BASE, **companions, **{field.name: value}))
            except ValueError:
                continue
            if field.name in PAIRED:
                return flipped, None
            return flipped, AugmentConfig(**dict(BASE, **companions))
    raise AssertionError(f"could not give AugmentConfig.{field.name} a non-default valid value")


def _decoder():
    return get_decoder("auto")


def test_the_base_configuration_is_native():
    assert augment_is_native(AugmentConfig(**BASE))
    if batch is not None and _decoder().region_options() is not None:
        assert isinstance(run_options(Augmenter(AugmentConfig(**BASE)), _decoder()), RunOptions)


@pytest.mark.parametrize("field", [f for f in dataclasses.fields(AugmentConfig)
                                   if f.default is not dataclasses.MISSING],
                         ids=lambda f: f.name)
def test_every_field_outside_the_allow_list_takes_the_python_path(field):
    config, unflipped = _flipped(field)
    assert getattr(config, field.name) != field.default
    if unflipped is not None:
        assert augment_is_native(unflipped)  # so the flipped field is what the gate refuses
    if field.name in NATIVE_AUGMENT_FIELDS:
        return  # C renders it (within augment_is_native's value limits)
    assert not augment_is_native(config)
    assert run_options(Augmenter(config), _decoder()) is None


def test_a_new_field_takes_the_python_path_until_allowed():
    @dataclasses.dataclass(frozen=True)
    class Extended(AugmentConfig):
        new_knob: int = 0

    assert augment_is_native(Extended(**BASE))
    assert not augment_is_native(Extended(**BASE, new_knob=1))


@native
def test_c_names_the_option_it_cannot_parse(tmp_path):
    path = tmp_path / "empty.rec"
    path.write_bytes(b"")
    options = run_options(Augmenter(AugmentConfig(**BASE)), _decoder())
    if options is None:
        pytest.skip("the decoder does not decode regions with recpipe._batch")
    columns = [np.zeros(1, np.int64) for _ in range(4)]
    images = np.zeros((1, 3, 64, 64), np.float32)
    with open(path, "rb") as f:
        args = (f.fileno(), 0, *columns, images, np.zeros(1, np.float32), np.zeros(1, np.uint8),
                0, 0, 0)
        with pytest.raises(TypeError, match="OPTION_FIELDS"):
            batch.fill(*args, tuple(options)[:-1])
        with pytest.raises(TypeError, match="options.resize"):
            batch.fill(*args, options._replace(resize="large"))
        assert batch.fill(*args, options) == 0  # an empty file: the sample is left to Python
