"""numpy batches and labels as torch tensors: torch imported on first use (``torch_module``),
labels cast as torch wants them (``LabelCast``), a device checked before the first batch
(``usable_device``)."""

import numpy as np

from .._optional import require

__all__ = ["LabelCast", "torch_module", "usable_device"]


def torch_module():
    """The ``torch`` module, or ImportError with the install hint."""
    return require("torch", "torch")


class LabelCast:
    """Labels as torch wants them: ``label_dtype`` when given; else int64 for class labels
    (``label_width == 1`` and whole numbers), float32 otherwise.

    The choice is made on the first labels seen and kept, so every batch has one dtype; a
    fractional label after int64 was chosen raises ValueError naming ``label_dtype``.
    """

    def __init__(self, label_dtype=None, label_width=1):
        self.label_dtype = label_dtype
        self.label_width = int(label_width)
        self._integral = None if label_width == 1 else False

    def decide(self, labels):
        """Choose int64 or float32 from ``labels`` (when nothing is chosen yet)."""
        if self._integral is None and self.label_dtype is None:
            array = np.asarray(labels)
            self._integral = bool(np.all(array == np.floor(array)))

    def __call__(self, labels, torch):
        """``labels`` (a numpy array or scalar) as a tensor of the chosen dtype."""
        array = np.asarray(labels)
        if self.label_dtype is not None:
            return torch.from_numpy(array).to(self.label_dtype)
        self.decide(array)
        whole = self._integral and bool(np.all(array == np.floor(array)))
        if not self._integral:
            return torch.from_numpy(array.astype(np.float32, copy=False))
        if not whole:
            bad = array[array != np.floor(array)].ravel()[0]
            raise ValueError(f"label {bad} is fractional, after whole-number class labels "
                             "were served as int64: pass label_dtype=torch.float32 for "
                             "real-valued labels (the choice is made on the first labels)")
        return torch.from_numpy(array.astype(np.int64))


def usable_device(torch, device):
    """``torch.device(device)``, or ValueError now when it cannot hold a tensor (``"cuda"``
    without CUDA, a GPU index past the last one) instead of at the first batch."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cpu":
        return device
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r}: CUDA is not available here (torch "
                         f"{torch.__version__}, torch.cuda.is_available() is False); use "
                         "device='cuda' if torch.cuda.is_available() else 'cpu'")
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as exc:
        raise ValueError(f"device={str(device)!r} cannot be used: {exc}") from exc
    return device
