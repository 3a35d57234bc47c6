"""Datasets with a function applied to each sample, as gluon's ``Dataset.transform`` /
``transform_first`` make them: ``recpipe.torch.RecordDataset`` and ``recpipe.mx``'s gluon
``ImageRecordDataset`` both take these methods from ``Transformable``."""

from typing import Any, Callable, List, Optional

__all__ = ["First", "Transformable", "TransformedDataset"]


class First:
    """``fn`` applied to the first element of a sample (picklable, unlike a lambda)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, first, *rest) -> tuple:
        return (self.fn(first),) + rest


class Transformable:
    """``transform(fn)`` / ``transform_first(fn)``: a dataset whose samples are
    ``fn(image, label)`` / ``(fn(image), label)``, computed as each sample is read
    (``lazy=True``) or all now. ``eager_list``: ``lazy=False`` returns the computed samples as
    a list (gluon's way) instead of a dataset holding them."""

    eager_list = False

    def transform(self, fn: Callable, lazy: bool = True) -> Any:
        """This dataset with ``fn`` applied to every sample after the present transforms."""
        if lazy or not self.eager_list:
            return TransformedDataset(self, fn, lazy=lazy)
        dataset = TransformedDataset(self, fn)
        return [dataset[i] for i in range(len(dataset))]

    def transform_first(self, fn: Callable, lazy: bool = True) -> Any:
        """This dataset with ``fn`` applied to the image (first element) of every sample."""
        return self.transform(First(fn), lazy=lazy)


class TransformedDataset(Transformable):
    """``dataset`` with ``fn(*sample)`` applied to each sample (lazily, or all at once)."""

    def __init__(self, dataset, fn: Callable, lazy: bool = True) -> None:
        self.dataset = dataset
        self.fn = fn
        self._samples: Optional[List[Any]] = None
        if not lazy:
            self._samples = [self._apply(dataset[i]) for i in range(len(dataset))]

    @property
    def eager_list(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.dataset, "eager_list", False))

    def _apply(self, sample):
        return self.fn(*sample) if isinstance(sample, tuple) else self.fn(sample)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        if self._samples is not None:
            return self._samples[index]
        return self._apply(self.dataset[index])

    def set_epoch(self, epoch: int) -> None:
        """The wrapped dataset's augmentation uses epoch number ``epoch``."""
        self.dataset.set_epoch(epoch)
