"""Per-sample random streams: Philox keyed by the seed, its counter at (sample, epoch), so a
sample's draws do not depend on threads or on the order samples are decoded in.

recpipe draws its own plans from C (csrc/plan/draws.h through ``recpipe._plan.draws``, the
draws ``recpipe._batch`` plans with): ``SampleStream`` names a sample's stream and
``Planner.plan`` draws from it there. ``sample_rng`` is the same stream as a numpy Generator,
for augmenters of one's own (and the tests' reference for the C).
"""

import threading

import numpy as np

from ..._optional import native

__all__ = ["SampleStream", "sample_rng", "sample_stream", "thread_sample_rng"]

_MASK64 = (1 << 64) - 1


def sample_rng(seed, epoch, index):
    """The RNG of one sample: Philox keyed by ``seed`` with the counter at ``(index, epoch)``.

    Creating it costs a few microseconds (no SeedSequence hashing); streams of different
    samples do not overlap unless one sample draws 2**128 blocks.
    """
    if seed < 0 or epoch < 0 or index < 0:
        raise ValueError(f"seed, epoch and index must be >= 0, got {seed}, {epoch}, {index}")
    bits = np.random.Philox(key=seed & ((1 << 128) - 1),
                            counter=[0, 0, index & _MASK64, epoch & _MASK64])
    return np.random.Generator(bits)


def _check(seed, epoch, index):
    if seed < 0 or epoch < 0 or index < 0:
        raise ValueError(f"seed, epoch and index must be >= 0, got {seed}, {epoch}, {index}")


class SampleStream:
    """The random stream of sample ``index`` of ``epoch`` under ``seed`` (``sample_stream``):
    ``Planner.plan`` draws a plan's uniforms and normals from it in C (``draws``). Anything
    else asked of it is answered by the stream as a numpy Generator (``generator``; the thread's
    reused one, valid until this thread's next ``thread_sample_rng``), as
    ``Augmenter.sample_rng`` answered before: ``stream.random(3)`` works."""

    __slots__ = ("seed", "epoch", "index", "_generator")

    def __init__(self, seed, epoch, index):
        _check(seed, epoch, index)
        self.seed, self.epoch, self.index = seed, epoch, index
        self._generator = None

    def draws(self, normals):
        """``(uniforms, normals)``: the plan's N_UNIFORM uniforms (bytes of float64, what
        Generator.random(N_UNIFORM) gives) and, when ``normals``, PCA lighting's 3 normals
        drawn after them (bytes of 3 float64; None when ``recpipe._plan`` was built without
        numpy's sampler: ``plan_normals`` draws them with numpy then)."""
        seed = self.seed
        return native("_plan").draws(seed, seed >> 64, self.index, self.epoch, normals)

    def numpy_normals(self, uniforms):
        """PCA lighting's 3 normals drawn with numpy after ``uniforms`` uniforms: the fallback
        where ``recpipe._plan`` has no normal sampler (``recpipe._plan.PCA_NATIVE`` 0)."""
        rng = sample_rng(self.seed, self.epoch, self.index)
        rng.random(uniforms)
        return rng.standard_normal(3)

    @property
    def generator(self):
        """This stream as a numpy Generator (``thread_sample_rng``), made when first asked."""
        if self._generator is None:
            self._generator = thread_sample_rng(self.seed, self.epoch, self.index)
        return self._generator

    def __getattr__(self, name):
        return getattr(self.generator, name)

    def __repr__(self):
        return f"SampleStream(seed={self.seed}, epoch={self.epoch}, index={self.index})"


def sample_stream(seed, epoch, index):
    """The stream of sample ``index`` of ``epoch`` under ``seed``: what ``Planner.plan`` draws
    from in C (``SampleStream``)."""
    return SampleStream(seed, epoch, index)


class _ThreadRng(threading.local):
    """One Philox generator per thread, re-keyed per sample (see Augmenter.sample_rng)."""

    def __init__(self):
        self.bits = np.random.Philox(key=0)
        self.generator = np.random.Generator(self.bits)
        self.state = self.bits.state


_THREAD_RNG = _ThreadRng()


def thread_sample_rng(seed, epoch, index):
    """The stream of ``sample_rng(seed, epoch, index)`` from a generator reused by the calling
    thread (~1 us instead of ~10 us): valid until this thread's next call."""
    if seed < 0 or epoch < 0 or index < 0:
        raise ValueError(f"seed, epoch and index must be >= 0, got {seed}, {epoch}, {index}")
    local = _THREAD_RNG
    state = local.state
    key = seed & ((1 << 128) - 1)
    inner = state["state"]
    inner["key"][0], inner["key"][1] = key & _MASK64, key >> 64
    counter = inner["counter"]
    counter[0] = counter[1] = 0
    counter[2], counter[3] = index & _MASK64, epoch & _MASK64
    state["buffer_pos"] = 4  # empty output buffer, as a new Philox has
    state["has_uint32"] = state["uinteger"] = 0
    local.bits.state = state
    return local.generator
