"""What ``import recpipe.mx as mx`` serves of MXNet, and the error for everything else.

``COVERS`` lists it (the data side a training script touches: records, images, iterators,
gluon's record dataset and DataLoader, contexts, array construction, seeding, the kvstore's
rank); ``not_covered(where, name)`` is the ``NotCoveredError`` (an AttributeError) a name
outside it raises: what recpipe.mx covers and what to do instead for that kind of name.
"""

import importlib.util

import numpy as np

from ..errors import NotCoveredError

__all__ = ["ADVICE", "COVERS", "MXNET_NAMES", "not_covered", "use_recpipe_mx"]

COVERS = ("recpipe.mx serves MXNet's data side: mx.recordio, mx.image/mx.img (imdecode, "
          "imread), mx.io (ImageRecordIter, ImageRecordUInt8Iter, DataBatch, DataDesc, DataIter), "
          "mx.gluon.data (DataLoader, vision.ImageRecordDataset, vision.transforms with MXNet), "
          "mx.nd array construction (array, empty, zeros, ones, full, arange, from_numpy: numpy "
          "arrays with .asnumpy()), contexts (mx.cpu, mx.gpu, mx.cpu_pinned, mx.Context, "
          "mx.context.num_gpus), mx.random (seed, which recpipe's loaders honour; uniform, "
          "normal, randint) and mx.kvstore.create (rank and num_workers)")

_TRAINING = ("training is MXNet's own: install mxnet==1.9.1 (with numpy<1.24) and `import "
             "mxnet` for it, or train with PyTorch on recpipe.torch's TorchLoader")
_NUMPY = ("recpipe.mx's arrays are numpy arrays (with .asnumpy()): use numpy's function of the "
          "same purpose on them")
_AUGMENT = ("augment in the iterator instead: mx.io.ImageRecordIter's keywords (resize=, "
            "rand_crop=, random_resized_crop=, rand_mirror=, brightness=, mean_r=, ...) or "
            "recpipe.torch's loaders, which take the same keywords")

# MXNet 1.9.1's other top-level names: ``import recpipe as mx`` points at recpipe.mx for them
MXNET_NAMES = frozenset((
    "AttrScope Context MXNetError api attribute autograd base callback context contrib cpu "
    "cpu_pinned current_context engine error executor executor_manager gluon gpu init "
    "initializer is_np_array is_np_shape kv kvstore libinfo library log lr_scheduler metric mod "
    "model module mon monitor name nd ndarray notebook np np_array np_shape npx num_gpus numpy "
    "numpy_extension onnx operator optimizer profiler random registry rnd rnn rtc runtime "
    "set_np_shape sym symbol test_utils th torch tvmop use_np use_np_array use_np_shape util "
    "visualization viz").split())

# first part of a dotted name -> what to do instead
ADVICE = {
    **dict.fromkeys(("mod", "module", "sym", "symbol", "model", "init", "initializer",
                     "optimizer", "metric", "callback", "lr_scheduler", "autograd", "executor",
                     "monitor", "mon", "rnn", "operator", "profiler", "engine", "amp", "onnx",
                     "visualization", "viz", "Trainer", "nn", "loss", "rtc", "library",
                     "KVStore"),
                    _TRAINING),
    **dict.fromkeys(("np", "npx", "numpy", "numpy_extension"), _NUMPY),
    **dict.fromkeys(("resize_short", "center_crop", "random_crop", "random_size_crop",
                     "fixed_crop", "scale_down", "color_normalize", "imresize", "copyMakeBorder",
                     "CreateAugmenter", "ColorJitterAug", "HorizontalFlipAug", "ResizeAug",
                     "ForceResizeAug", "RandomCropAug", "RandomSizedCropAug", "CenterCropAug",
                     "BrightnessJitterAug", "ContrastJitterAug", "SaturationJitterAug",
                     "HueJitterAug", "LightingAug", "ColorNormalizeAug", "RandomGrayAug",
                     "CastAug", "RandomOrderAug", "SequentialAug", "Augmenter", "ImageIter",
                     "ImageDetIter", "PrefetchImageIter", "image"), _AUGMENT),
    **dict.fromkeys(("PrefetchingIter", "NDArrayIter", "CSVIter", "LibSVMIter", "MNISTIter",
                     "ResizeIter", "DataLoaderIter"),
                    "recpipe.mx.io's ImageRecordIter already decodes ahead in threads (no "
                    "PrefetchingIter needed); for arrays already in memory, iterate numpy "
                    "slices or use mx.gluon.data.DataLoader"),
}


def not_covered(where: str, name: str) -> AttributeError:
    """The error for ``where.name`` (``where``: ``mx``, ``mx.nd``, ``mx.gluon.data`` ...); a
    plain AttributeError for a dunder name (Python's own probes, not a user's)."""
    if name.startswith("__") and name.endswith("__"):
        return AttributeError(f"{where} has no attribute {name!r}")
    advice = ADVICE.get(name) or ADVICE.get(where.rsplit(".", 1)[-1])
    if advice is None and where.rsplit(".", 1)[-1] in ("nd", "ndarray"):
        advice = ("recpipe.mx.nd only builds arrays, and they are numpy arrays (with "
                  ".asnumpy()): use numpy on them"
                  + (f" (np.{name})" if hasattr(np, name) else ""))
    if advice is None:
        advice = ("it is not a data-loading name recpipe serves"
                  + ("; MXNet is installed here: `import mxnet` for it"
                     if importlib.util.find_spec("mxnet") is not None else
                     " (install mxnet==1.9.1 with numpy<1.24 and `import mxnet` for the rest)"))
    return NotCoveredError(f"{where}.{name} is not in recpipe.mx: {advice}. {COVERS}.")


def use_recpipe_mx(name: str) -> NotCoveredError:
    """The error for ``mx.<name>`` (one of ``MXNET_NAMES``) under ``import recpipe as mx``,
    which serves ``mx.recordio`` and ``mx.image`` only: ``import recpipe.mx as mx`` serves it
    or says what to do instead."""
    return NotCoveredError(
        f"mx.{name} is not served by `import recpipe as mx`, which serves mx.recordio and "
        "mx.image (mx.img): use `import recpipe.mx as mx`, which also serves MXNet's data "
        "side (mx.io's iterators, mx.gluon.data, contexts such as mx.cpu(), mx.nd array "
        "construction, mx.random.seed, mx.kvstore.create) and says what to do for the rest")
