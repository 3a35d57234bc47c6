"""``mx.random`` without MXNet: ``seed``, which recpipe's loaders honour, and numpy-backed
``uniform``, ``normal``, ``randint``.

``mx.random.seed(n)`` makes what follows reproducible: the loaders made after it take ``n`` as
their seed when they are given none (``mx.io.ImageRecordIter``'s ``seed``, which keys its
shuffle and its augmentation; ``mx.gluon.data.DataLoader``'s shuffle), and ``uniform`` /
``normal`` / ``randint`` draw from a generator seeded with ``n``. An explicit ``seed=`` still
wins. (MXNet's own ImageRecordIter ignores ``mx.random.seed``; recpipe's honour it.) With MXNet
installed, ``seed`` also seeds MXNet's generators, and the draws are MXNet's NDArrays.
"""

import threading
from typing import Any, Dict

import numpy as np

from .backend import real_mxnet
from .devices import host_only
from .coverage import not_covered
from .arrays import NDArray

__all__ = ["current_seed", "normal", "randint", "seed", "uniform"]

_state: Dict[str, Any] = {"seed": None, "generator": np.random.default_rng()}
_lock = threading.Lock()


def seed(seed_state, ctx="all"):
    """Seed what follows: loaders made from now on without a seed of their own, and the draws
    here (and MXNet's generators, when MXNet is installed)."""
    if isinstance(seed_state, bool) or not isinstance(seed_state, (int, np.integer)) \
            or seed_state < 0:
        raise ValueError(f"seed_state={seed_state!r}: expected an integer >= 0")
    with _lock:
        _state["seed"] = int(seed_state)
        _state["generator"] = np.random.default_rng(int(seed_state))
    mx = real_mxnet()
    if mx is not None:
        mx.random.seed(int(seed_state), ctx=ctx)


def current_seed():
    """The seed given to ``seed`` last, or None (the loaders then keep their own defaults)."""
    return _state["seed"]


def _draw(name, method, shape, dtype, ctx, *args):
    mx = real_mxnet()
    if mx is not None:
        return getattr(mx.random, name)(*args, shape=shape, dtype=dtype, ctx=ctx)
    host_only(ctx, f"random.{name}")
    with _lock:
        values = getattr(_state["generator"], method)(*args, size=shape)
    return np.ascontiguousarray(values, dtype=dtype or np.float32).view(NDArray)


def uniform(low=0, high=1, shape=(1,), dtype=None, ctx=None, **kwargs):
    return _draw("uniform", "uniform", shape, dtype, ctx, low, high)


def normal(loc=0, scale=1, shape=(1,), dtype=None, ctx=None, **kwargs):
    return _draw("normal", "normal", shape, dtype, ctx, loc, scale)


def randint(low, high, shape=(1,), dtype=None, ctx=None, **kwargs):
    return _draw("randint", "integers", shape, dtype or np.int32, ctx, low, high)


def __getattr__(name):
    raise not_covered("mx.random", name)
