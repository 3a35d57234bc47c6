"""A sample's random draws are defined once, in C (csrc/plan/draws.h through recpipe._plan.draws,
the draws recpipe._batch plans with): the Python path's Planner draws a ``SampleStream`` there,
and numpy's Philox Generator (``sample_rng``) is the reference the C is checked against."""

import numpy as np
import pytest

from recpipe._optional import extension, native
from recpipe.decode.augment import (AugmentConfig, Augmenter, SampleStream, sample_rng,
                                    sample_stream)
from recpipe.decode.augment.plan import N_UNIFORM

plan_module = native("_plan")
MASK64 = (1 << 64) - 1
# numpy turns a counter list holding a word past 2**53 into float64 first (it loses bits:
# Philox(counter=[0, 0, 2**63 + 1, 0]) counts from 2**63), so the reference is checked below that;
# the C takes every uint64 as it is
KEYS = [(0, 0, 0), (1, 0, 0), (12345, 3, 77), ((1 << 127) + 99, 5, (1 << 52) + 1),
        (MASK64, (1 << 53) - 1, 1 << 40), ((1 << 130) + 7, 2, 1 << 64)]


@pytest.mark.parametrize("seed,epoch,index", KEYS)
def test_c_draws_equal_numpys_generator(seed, epoch, index):
    uniforms, normals = sample_stream(seed, epoch, index).draws(True)
    reference = sample_rng(seed, epoch, index)
    assert np.frombuffer(uniforms, np.float64).tobytes() == reference.random(N_UNIFORM).tobytes()
    if plan_module.PCA_NATIVE:
        assert np.frombuffer(normals, np.float64).tobytes() == \
            reference.standard_normal(3).tobytes()
    else:
        assert normals is None


def test_without_normals_none_are_drawn():
    assert sample_stream(1, 0, 2).draws(False)[1] is None


def test_the_c_draws_are_the_batch_runs():
    batch = extension("_batch")
    if batch is None:
        pytest.skip("recpipe._batch is not built")
    for seed, epoch, index in KEYS[:4]:
        key = seed & ((1 << 128) - 1)
        uniforms, normals = sample_stream(seed, epoch, index).draws(True)
        assert batch.uniforms(key & MASK64, key >> 64, index & MASK64, epoch & MASK64,
                              N_UNIFORM) == np.frombuffer(uniforms).tolist()
        if batch.PCA_NATIVE and plan_module.PCA_NATIVE:
            assert batch.normals(key & MASK64, key >> 64, index & MASK64,
                                 epoch & MASK64) == tuple(np.frombuffer(normals))


PCA = dict(data_shape=(3, 24, 24), rand_crop=True, rand_mirror=True, pca_noise=0.2,
           brightness=0.3, contrast=0.2, saturation=0.1, max_rotate_angle=10,
           min_random_area=0.3, random_h=10, random_l=20)


def test_the_planner_draws_a_sample_stream_in_c(monkeypatch):
    aug = Augmenter(AugmentConfig(**PCA))
    calls = []
    real = plan_module.draws

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(plan_module, "draws", spy)
    stream = aug.sample_rng(9, 2, 31)
    assert isinstance(stream, SampleStream)
    plan = aug.plan(80, 96, stream)
    assert calls == [(9, 0, 31, 2, True)]
    assert plan == aug.plan(80, 96, sample_rng(9, 2, 31))  # numpy's Generator: the reference


def test_the_planner_falls_back_to_numpys_normals(monkeypatch):
    aug = Augmenter(AugmentConfig(**PCA))
    real = plan_module.draws
    monkeypatch.setattr(plan_module, "draws", lambda *args: (real(*args)[0], None))
    for index in range(20):
        assert aug.plan(64, 50, aug.sample_rng(4, 1, index)) == \
            aug.plan(64, 50, sample_rng(4, 1, index))


def test_a_sample_stream_is_still_a_generator():
    stream = Augmenter(AugmentConfig(data_shape=(3, 8, 8))).sample_rng(3, 1, 7)
    assert stream.random(8).tolist() == sample_rng(3, 1, 7).random(8).tolist()
    with pytest.raises(ValueError, match="must be >= 0"):
        sample_stream(-1, 0, 0)
