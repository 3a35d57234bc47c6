"""recpipe: pack, read and decode MXNet RecordIO image datasets fast, without MXNet."""

import importlib
import logging

from .errors import DecodeError, NotCoveredError, RecordFormatError, RecordTooLargeError
from .io import (
    IRHeader,
    ListEntry,
    RecordReader,
    RecordWriter,
    pack,
    pack_img,
    read_index,
    read_list,
    unpack,
    unpack_img,
)

__version__ = "0.1.0"

__all__ = [
    "DecodeError",
    "IRHeader",
    "ImageLoader",
    "ListEntry",
    "LoaderOptions",
    "RecordFormatError",
    "RecordReader",
    "RecordTooLargeError",
    "RecordWriter",
    "pack",
    "pack_img",
    "read_index",
    "read_list",
    "replay",
    "unpack",
    "unpack_img",
]

# a library configures no logging on import: $RECPIPE_LOG_LEVEL is applied by the CLI at its start
# and by a loader when it reads recpipe's environment (recpipe.system.env.configure_logging)
logging.getLogger(__name__).addHandler(logging.NullHandler())


# ``import recpipe as mx`` serves programs written for ``mx.recordio`` / ``mx.image`` (``mx.img``)
_SUBMODULES = {"recordio": "recordio", "image": "image", "img": "image"}
# MXNet 1.9.1's other top-level names: ``import recpipe as mx`` points at recpipe.mx for them
_MXNET_NAMES = frozenset((
    "AttrScope Context MXNetError api attribute autograd base callback context contrib cpu "
    "cpu_pinned current_context engine error executor executor_manager gluon gpu init "
    "initializer is_np_array is_np_shape kv kvstore libinfo library log lr_scheduler metric mod "
    "model module mon monitor name nd ndarray notebook np np_array np_shape npx num_gpus numpy "
    "numpy_extension onnx operator optimizer profiler random registry rnd rnn rtc runtime "
    "set_np_shape sym symbol test_utils th torch tvmop use_np use_np_array use_np_shape util "
    "visualization viz").split())


def __getattr__(name):
    # imported on first use: the decode stack is not needed to pack or read records, and
    # importing it costs every command-line start (see BENCHMARKS.md, pack)
    if name in ("ImageLoader", "LoaderOptions"):
        from . import decode

        return getattr(decode, name)
    if name == "replay":
        from .decode.replay import replay

        return replay
    if name in _SUBMODULES:
        return importlib.import_module(f".{_SUBMODULES[name]}", __name__)
    if name in _MXNET_NAMES:
        raise NotCoveredError(
            f"mx.{name} is not served by `import recpipe as mx`, which serves mx.recordio and "
            "mx.image (mx.img): use `import recpipe.mx as mx`, which also serves MXNet's data "
            "side (mx.io's iterators, mx.gluon.data, contexts such as mx.cpu(), mx.nd array "
            "construction, mx.random.seed, mx.kvstore.create) and says what to do for the rest")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
