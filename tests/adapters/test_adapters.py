"""What the framework adapters share: one transformed dataset (gluon's ``transform`` /
``transform_first``) and one facade over an ``ImageLoader`` (length, state, stats, close,
context manager), used by ``recpipe.torch`` and ``recpipe.mx`` alike."""

import pickle

import pytest

from recpipe.adapters.facade import LoaderFacade
from recpipe.adapters.transformed import First, Transformable, TransformedDataset


class Squares(Transformable):
    def __init__(self, n, eager_list=False):
        self.n, self.eager_list, self.epochs = n, eager_list, []

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not 0 <= index < self.n:
            raise IndexError(index)
        return index * index, index

    def set_epoch(self, epoch):
        self.epochs.append(epoch)


def test_transform_is_lazy_and_chains():
    base = Squares(4)
    calls = []
    doubled = base.transform(lambda image, label: (calls.append(label) or image * 2, label))
    assert isinstance(doubled, TransformedDataset) and not calls
    assert doubled[3] == (18, 3) and calls == [3]
    negated = doubled.transform_first(lambda image: -image)
    assert [negated[i] for i in range(len(negated))] == [(0, 0), (-2, 1), (-8, 2), (-18, 3)]
    negated.set_epoch(5)
    assert base.epochs == [5]


def test_an_eager_transform_computes_now_a_dataset_or_gluons_list():
    calls = []
    eager = Squares(3).transform_first(lambda image: calls.append(image) or image + 1,
                                       lazy=False)
    assert calls == [0, 1, 4] and isinstance(eager, TransformedDataset)
    assert eager[2] == (5, 2) and eager.transform_first(str)[0] == ("1", 0)
    assert Squares(3, eager_list=True).transform_first(str, lazy=False) == \
        [("0", 0), ("1", 1), ("4", 2)]


def test_first_pickles():
    assert pickle.loads(pickle.dumps(First(abs)))(-3, "label") == (3, "label")


def test_the_adapters_use_the_shared_pieces():
    import recpipe.torch
    from recpipe.mx.gluon.data.vision import ImageRecordDataset
    from recpipe.mx.record_iter import iterator_classes
    from recpipe.mx.dataiter import NUMPY_BACKEND

    assert recpipe.torch.TransformedDataset is TransformedDataset
    assert issubclass(recpipe.torch.RecordDataset, Transformable)
    assert issubclass(ImageRecordDataset, Transformable) and ImageRecordDataset.eager_list
    for cls in (recpipe.torch.TorchLoader, iterator_classes(NUMPY_BACKEND)["ImageRecordIter"]):
        assert issubclass(cls, LoaderFacade)
        for name in ("__len__", "stats", "close", "__enter__", "__exit__", "state_dict"):
            assert getattr(cls, name) is getattr(LoaderFacade, name), (cls, name)


class _Loader:
    def __init__(self):
        self.closed = False

    def __len__(self):
        return 7

    def stats(self):
        return {"batches": 7}

    def state_dict(self):
        return {"epoch": 1}

    def load_state_dict(self, state):
        self.state = state

    def close(self):
        self.closed = True


def test_the_facade_hands_the_tail_to_the_loader():
    class Front(LoaderFacade):
        def __init__(self):
            self.loader = _Loader()

    with Front() as front:
        assert len(front) == 7 and front.stats() == {"batches": 7}
        assert front.state_dict() == {"epoch": 1}
        front.load_state_dict({"epoch": 2})
        assert front.loader.state == {"epoch": 2}
    assert front.loader.closed
    with pytest.raises(RuntimeError), Front() as front:
        raise RuntimeError
    assert front.loader.closed
