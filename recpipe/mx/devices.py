"""``mx.context`` without MXNet (this module; ``mx.cpu`` and the rest at the top too): ``Context``,
``cpu``, ``gpu``, ``cpu_pinned``, ``num_gpus``, ``current_context``.

A ``Context`` names a device as MXNet's does (``cpu(0)``, ``gpu(1)``; equal to the string
MXNet prints, so ``array.context == mx.cpu()`` holds) and works as ``with mx.gpu(0): ...``.
recpipe.mx's arrays live in host memory: they are made for ``cpu``, ``cpu_pinned`` and
``cpu_shared`` contexts; asking for one on a GPU raises ValueError saying so (an accelerator
takes the batch from the host: ``torch.from_numpy(batch).cuda()``). ``num_gpus()`` is 0 for
the same reason. With MXNet installed, ``recpipe.mx`` serves MXNet's own contexts instead.
"""

import threading

from .coverage import not_covered

__all__ = ["Context", "cpu", "cpu_pinned", "current_context", "gpu", "num_gpus", "host_only"]

_DEVICE_TYPES = ("cpu", "gpu", "cpu_pinned", "cpu_shared")
_HOST = ("cpu", "cpu_pinned", "cpu_shared")


class Context:
    """A device: ``Context('gpu', 1)``, or a copy of another ``Context``."""

    _current = threading.local()

    def __init__(self, device_type, device_id=0):
        if isinstance(device_type, Context):
            other: Context = device_type
            device_type, device_id = other.device_type, other.device_id
        if device_type not in _DEVICE_TYPES:
            raise ValueError(f"device_type={device_type!r}: expected one of {_DEVICE_TYPES}")
        if int(device_id) < 0:
            raise ValueError(f"device_id={device_id!r} must be >= 0")
        self.device_type: str = device_type
        self.device_id: int = int(device_id)
        self._previous = []

    @property
    def device_typeid(self):
        return _DEVICE_TYPES.index(self.device_type) + 1

    def __str__(self):
        return f"{self.device_type}({self.device_id})"

    __repr__ = __str__

    def __eq__(self, other):
        if isinstance(other, Context):
            return (self.device_type, self.device_id) == (other.device_type, other.device_id)
        if isinstance(other, str):
            return str(self) == other
        return NotImplemented

    def __hash__(self):
        return hash(str(self))

    def __enter__(self):
        self._previous.append(getattr(Context._current, "value", None))
        Context._current.value = self
        return self

    def __exit__(self, *exc):
        Context._current.value = self._previous.pop()

    def empty_cache(self):
        """Nothing to release: recpipe.mx keeps no device memory pool."""


def cpu(device_id=0):
    return Context("cpu", device_id)


def gpu(device_id=0):
    return Context("gpu", device_id)


def cpu_pinned(device_id=0):
    return Context("cpu_pinned", device_id)


def num_gpus():
    """0: recpipe.mx's arrays live in host memory (a GPU's are MXNet's or torch's to make)."""
    return 0


def current_context():
    """The context of the innermost ``with context:`` of this thread, else ``cpu(0)``."""
    return getattr(Context._current, "value", None) or cpu()


def host_only(ctx, what):
    """``ctx`` (None: the current context) as a host ``Context``; ValueError for a GPU one."""
    ctx = current_context() if ctx is None else Context(ctx) if isinstance(ctx, Context) \
        else Context(*_parse(ctx))
    if ctx.device_type not in _HOST:
        raise ValueError(f"{what} on {ctx}: recpipe.mx's arrays live in host memory (numpy); "
                         "make them on mx.cpu() and move the batch to the GPU with your "
                         "framework (torch.from_numpy(batch).cuda(), or MXNet's as_in_context "
                         "with MXNet installed)")
    return ctx


def _parse(text):
    text = str(text)
    name, _, rest = text.partition("(")
    return name, int(rest.rstrip(")") or 0)


def __getattr__(name):
    raise not_covered("mx.context", name)
