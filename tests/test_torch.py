"""recpipe.torch: RecordDataset in DataLoader workers, TorchLoader, ShardSampler, training loops."""

import json
import pickle
import warnings

import cv2
import numpy as np
import pytest

import recpipe
from recpipe.decode.augment.effect import NoEffectWarning
from recpipe.decode.loader import ImageLoader
from recpipe.decode.options import LoaderOptions
from recpipe.errors import DecodeError
from recpipe.io import IRHeader, pack

from ._photos import pack_training_set

torch = pytest.importorskip(
    "torch", reason="torch is not installed: pip install torch==2.13.0 (ci/test.sh does)")
rt = pytest.importorskip("recpipe.torch")

N_IMAGES = 21


def _image(i):
    h, w = 26 + (i * 5) % 20, 40 - (i * 3) % 14
    ys, xs = np.mgrid[0:h, 0:w]
    return np.stack([(xs * 6 + i * 9) % 256, (ys * 5 + i * 13) % 256,
                     np.full((h, w), (i * 37) % 256)], axis=-1).astype(np.uint8)


def _jpeg(bgr):
    return cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    """N_IMAGES records labelled i % 3, with two packed labels (i, -i)."""
    url = str(tmp_path_factory.mktemp("torch") / "small.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(N_IMAGES):
            writer.write(pack(IRHeader(0, [float(i % 3), float(-i)], i, 0), _jpeg(_image(i))))
    return url


@pytest.fixture(scope="module")
def photos_rec(tmp_path_factory):
    """``(rec, classes)``: 20 photos of each of 4 classes (see tests/_photos.py)."""
    url = tmp_path_factory.mktemp("photos") / "photos.rec"
    assert pack_training_set(url, 4, 20) == 80
    return str(url), 4


AUG = dict(resize=30, rand_crop=True, rand_mirror=True, brightness=0.2, seed=4)


def _dataset_epoch(dataset, **loader_kwargs):
    loader = torch.utils.data.DataLoader(dataset, batch_size=6, **loader_kwargs)
    images, labels = zip(*loader)
    return torch.cat(images), torch.cat(labels)


# -- RecordDataset ----------------------------------------------------------------------------


def test_dataset_items_are_the_threaded_loaders_samples(rec):
    dataset = rt.RecordDataset(rec, (3, 24, 24), label_width=2, **AUG)
    dataset.set_epoch(1)
    with ImageLoader(rec, 7, (3, 24, 24), label_width=2, **AUG) as loader:
        loader.set_epoch(1)
        batches = list(loader)
    expected_images = np.concatenate([b[0] for b in batches])
    expected_labels = np.concatenate([b[1] for b in batches])
    assert len(dataset) == N_IMAGES
    for i in (0, 5, 20):
        image, label = dataset[i]
        assert image.dtype == torch.uint8 and tuple(image.shape) == (3, 24, 24)
        assert np.array_equal(image.numpy(), expected_images[i])
        assert label.tolist() == expected_labels[i].tolist() == [float(i % 3), float(-i)]
    dataset.set_epoch(2)  # a new epoch draws new augmentation
    assert not all(np.array_equal(dataset[i][0].numpy(), expected_images[i]) for i in range(5))


def test_dataset_items_decode_through_the_native_run_decoder(rec, monkeypatch):
    """__getitem__ hands its sample to recpipe._batch.fill (a run of one) when the gate allows
    it, with the pixels and labels the Python path gives."""
    from recpipe.decode import records
    from recpipe.decode.decoders import get_decoder

    batch = records.native_module()
    if batch is None or get_decoder("auto").region_options() is None:
        pytest.skip("recpipe._batch or the libjpeg region decoder is not built")
    done = []

    class Counting:  # recpipe._batch, counting the samples fill renders
        def __getattr__(self, name):
            return getattr(batch, name)

        def fill(self, *args):
            done.append(batch.fill(*args))
            return done[-1]

    def items(native):
        monkeypatch.setattr(records, "native_module", lambda: Counting() if native else None)
        dataset = rt.RecordDataset(rec, (3, 24, 24), label_width=2, **AUG)
        dataset.set_epoch(3)
        return [dataset[i] for i in range(N_IMAGES)]

    python_items = items(False)
    assert done == []
    native_items = items(True)
    assert done == [1] * N_IMAGES  # every sample rendered by C
    for (image, label), (want_image, want_label) in zip(native_items, python_items):
        assert torch.equal(image, want_image) and torch.equal(label, want_label)


def test_dataset_in_forked_dataloader_workers_matches_the_main_process(rec):
    dataset = rt.RecordDataset(rec, (3, 20, 20), label_width=2, label_dtype=torch.long, **AUG)
    dataset[0]  # the parent has its file open before the workers fork
    images0, labels0 = _dataset_epoch(dataset)
    images2, labels2 = _dataset_epoch(dataset, num_workers=2, multiprocessing_context="fork")
    assert images0.shape == (N_IMAGES, 3, 20, 20) and labels0.dtype == torch.long
    assert torch.equal(images0, images2) and torch.equal(labels0, labels2)
    assert dataset[3][1].tolist() == [0, -3]  # the parent still reads after the fork


def test_a_forked_child_lets_go_of_the_parents_reader_and_opens_its_own(rec):
    """The fork hook (recpipe.system.fork): in a child the parent's reader is let go of, not
    closed, and the first sample opens the child's own; the parent's stays open."""
    from tests._fork import outcome_in_child

    dataset = rt.RecordDataset(rec, (3, 20, 20), label_width=2, **AUG)
    parents = dataset._reader
    expected = dataset[2][0]

    def in_child():
        assert dataset._inherited, "the fork hook did not run"
        image, _ = dataset[2]
        assert dataset._reader is not parents and not dataset._inherited
        assert torch.equal(image, expected)

    status, message = outcome_in_child(in_child)
    assert status == 0 and message == "no error", message
    assert dataset._reader is parents and not dataset._inherited
    assert torch.equal(dataset[2][0], expected)


def test_dataset_pickles_without_its_open_file(rec):
    dataset = rt.RecordDataset(rec, (3, 16, 16), label_width=2, **AUG)
    state = dataset.__getstate__()
    assert state["_reader"] is None and state["_record_decoder"] is None
    clone = pickle.loads(pickle.dumps(dataset))  # what a spawn worker receives
    assert len(clone) == N_IMAGES
    assert torch.equal(clone[7][0], dataset[7][0])


def test_dataset_without_data_shape_hands_the_decoded_image_to_transform(rec):
    dataset = rt.RecordDataset(rec, transform=lambda img: img.shape, label_width=2)
    shape, label = dataset[4]
    assert shape == _image(4).shape
    raw = rt.RecordDataset(rec, label_width=2)[4][0]
    assert raw.dtype == torch.uint8
    # RGB of the BGR source
    assert np.abs(raw.numpy().astype(int) - _image(4)[..., ::-1]).mean() < 3
    with pytest.raises(ValueError, match="need data_shape"):
        rt.RecordDataset(rec, resize=10)


def test_dataset_errors_name_the_record(tmp_path):
    url = str(tmp_path / "bad.rec")
    with recpipe.RecordWriter(url) as writer:
        writer.write(pack(IRHeader(0, 1.0, 0, 0), _jpeg(_image(0))))
        writer.write(pack(IRHeader(0, 1.0, 1, 0), b"\xff\xd8 this is not a jpeg"))
    dataset = rt.RecordDataset(url, (3, 8, 8))
    assert dataset[0][1].item() == 1.0
    with pytest.raises(DecodeError) as info:
        dataset[1]
    assert info.value.record == 1 and "bad.rec" in str(info.value)
    with pytest.raises(recpipe.RecordFormatError, match="label_width=2"):
        rt.RecordDataset(url, (3, 8, 8), label_width=2)[0]


# -- TorchLoader ------------------------------------------------------------------------------


def test_loader_tensors_are_the_decoded_arrays_without_a_copy(rec, monkeypatch):
    seen = []
    original = torch.from_numpy

    def spy(array):
        tensor = original(array)
        seen.append((array.ctypes.data, tensor))
        return tensor

    monkeypatch.setattr(torch, "from_numpy", spy)
    with rt.TorchLoader(rec, 8, (3, 16, 16), rank=0, world_size=1, label_width=2,
                        threads=2, last_batch="pad") as loader:
        batches = list(loader)
    assert len(batches) == len(loader) == 3
    images, labels = batches[0]
    assert images.dtype == torch.uint8 and tuple(images.shape) == (8, 3, 16, 16)
    assert tuple(labels.shape) == (8, 2) and labels.dtype == torch.float32
    pointers = {tensor.data_ptr() for _, tensor in seen}
    assert all(address == tensor.data_ptr() for address, tensor in seen)
    assert images.data_ptr() in pointers and labels.data_ptr() in pointers
    assert loader.last_pad == 3


def test_loader_device_and_pin_memory_without_cuda(rec, recwarn):
    with rt.TorchLoader(rec, 10, (3, 8, 8), rank=0, world_size=1, label_width=2,
                        pin_memory=True, device="cpu", label_dtype=torch.long) as loader:
        images, labels = next(iter(loader))
        assert images.device.type == "cpu" and labels.dtype == torch.long
        assert loader.pin_memory is torch.cuda.is_available()
    if not torch.cuda.is_available():  # a warning the user sees, not a log record
        assert [str(w.message) for w in recwarn.list] == [
            "pin_memory=True ignored: no CUDA device is available"]
        assert recwarn.list[0].filename == __file__


def test_loader_takes_its_rank_from_the_environment(rec, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with rt.TorchLoader(rec, 4, (3, 8, 8), label_width=2) as loader:
        assert (loader.rank, loader.world_size) == (1, 2)
        assert (loader.loader.options.part_index, loader.loader.options.num_parts) == (1, 2)
        labels = torch.cat([lab for _, lab in loader])
    assert labels[:, 1].tolist()[:10] == [float(-i) for i in range(11, 21)]
    with pytest.raises(ValueError, match="part_index"):
        rt.TorchLoader(rec, 4, (3, 8, 8), part_index=0, num_parts=1)


def test_loader_resumes_mid_epoch_exactly(rec):
    kwargs = dict(rank=0, world_size=1, label_width=2, shuffle=True, threads=2, **AUG)

    def run(loader, epochs):
        return [[(i.clone(), lab.clone()) for i, lab in loader] for _ in range(epochs)]

    with rt.TorchLoader(rec, 4, (3, 12, 12), **kwargs) as loader:
        reference = run(loader, 2)
    with rt.TorchLoader(rec, 4, (3, 12, 12), **kwargs) as loader:
        first = iter(loader)
        taken = [next(first) for _ in range(2)]
        state = json.loads(json.dumps(loader.state_dict()))
    assert state["batch"] == 2 and state["epoch"] == 0
    assert all(torch.equal(a[0], b[0]) for a, b in zip(taken, reference[0]))
    with rt.TorchLoader(rec, 4, (3, 12, 12), **kwargs) as resumed:
        resumed.load_state_dict(state)
        rest = run(resumed, 2)
    assert len(rest[0]) == len(reference[0]) - 2
    for got, want in zip(rest[0] + rest[1], reference[0][2:] + reference[1]):
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


# -- ShardSampler -----------------------------------------------------------------------------


def test_shard_sampler_gives_every_rank_an_equal_share_of_one_permutation():
    parts = [list(rt.ShardSampler(23, shuffle=True, seed=3, rank=r, world_size=4))
             for r in range(4)]
    assert {len(p) for p in parts} == {6}
    joined = [x for p in parts for x in p]
    assert sorted(set(joined)) == list(range(23))
    assert joined[23:] == joined[:1]  # the one wrapped filler comes from the start
    sampler = rt.ShardSampler(23, shuffle=True, seed=3, rank=0, world_size=4)
    sampler.set_epoch(1)
    assert list(sampler) != parts[0] and len(sampler) == 6


# -- training ---------------------------------------------------------------------------------


def _net(classes):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, classes))


@pytest.fixture
def one_torch_thread():
    """Two torch threads on a busy 2-core machine spin-wait each other: use one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _train(batches_per_epoch, classes, epochs):
    """Train a small CNN; return the mean loss of each epoch."""
    torch.manual_seed(0)
    net = _net(classes)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
    mean = torch.tensor([123.7, 116.3, 103.5]).view(1, 3, 1, 1)
    losses = []
    for epoch in range(epochs):
        total, count = 0.0, 0
        for images, labels in batches_per_epoch(epoch):
            logits = net((images.float() - mean) / 58.0)
            loss = torch.nn.functional.cross_entropy(logits, labels.long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(labels), count + len(labels)
        losses.append(total / count)
    return losses


TRAIN_AUG = dict(resize=36, rand_crop=True, rand_mirror=True)


def test_training_with_the_threaded_loader_lowers_the_loss(photos_rec, one_torch_thread):
    url, classes = photos_rec
    with rt.TorchLoader(url, 16, (3, 32, 32), rank=0, world_size=1, shuffle=True, seed=1,
                        threads=2, label_dtype=torch.long, **TRAIN_AUG) as loader:
        def epoch_batches(epoch):
            loader.set_epoch(epoch)
            return loader
        losses = _train(epoch_batches, classes, epochs=10)
    assert all(np.isfinite(losses))
    assert np.mean(losses[-2:]) < 0.85 * np.mean(losses[:2]), losses


def test_training_with_dataset_and_dataloader_workers_lowers_the_loss(photos_rec, one_torch_thread):
    url, classes = photos_rec
    dataset = rt.RecordDataset(url, (3, 32, 32), seed=1, **TRAIN_AUG)
    generator = torch.Generator().manual_seed(0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True, num_workers=2,
                                         generator=generator, multiprocessing_context="fork")

    def epoch_batches(epoch):
        dataset.set_epoch(epoch)  # workers copy the dataset at every iter()
        return loader
    losses = _train(epoch_batches, classes, epochs=10)
    assert all(np.isfinite(losses))
    assert np.mean(losses[-2:]) < 0.85 * np.mean(losses[:2]), losses


# -- torch's conventions (issue 23) -------------------------------------------------------------


@pytest.fixture(scope="module")
def fractional_rec(tmp_path_factory):
    """N_IMAGES records whose single label is i / 4 (a regression target: 0, 0.25, ...)."""
    url = str(tmp_path_factory.mktemp("fractional") / "fractional.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(N_IMAGES):
            writer.write(pack(IRHeader(0, i / 4, i, 0), _jpeg(_image(i))))
    return url


def test_loader_class_labels_are_int64_and_cross_entropy_takes_them(rec):
    with rt.TorchLoader(rec, 8, (3, 8, 8), rank=0, world_size=1) as loader:
        images, labels = next(iter(loader))
    assert labels.dtype == torch.int64 and labels.tolist() == [i % 3 for i in range(8)]
    logits = torch.zeros(8, 3, requires_grad=True)
    torch.nn.functional.cross_entropy(logits, labels).backward()  # "expected Long" before


def test_dataset_class_labels_are_int64_and_other_labels_stay_float32(rec, fractional_rec):
    assert rt.RecordDataset(rec)[4][1].dtype == torch.int64
    assert rt.RecordDataset(rec)[4][1].item() == 1
    assert rt.RecordDataset(rec, label_width=2)[4][1].dtype == torch.float32
    assert rt.RecordDataset(rec, label_dtype=torch.float32)[4][1].dtype == torch.float32
    # a whole-number first label does not make a regression target int64: the first samples decide
    regression = rt.RecordDataset(fractional_rec)
    assert regression[0][1].dtype == torch.float32 and regression[0][1].item() == 0.0
    assert regression[5][1].item() == 1.25
    with rt.TorchLoader(fractional_rec, 8, (3, 8, 8), rank=0, world_size=1) as loader:
        labels = torch.cat([lab for _, lab in loader])
    assert labels.dtype == torch.float32 and labels.tolist()[:6] == [i / 4 for i in range(6)]


def test_loader_last_batch_is_partial_by_default_and_drop_last_drops_it(rec):
    with rt.TorchLoader(rec, 8, (3, 8, 8), rank=0, world_size=1) as loader:
        sizes = [len(labels) for _, labels in loader]
    assert sizes == [8, 8, 5] and loader.last_pad == 0  # 21 records, 21 samples
    with rt.TorchLoader(rec, 8, (3, 8, 8), rank=0, world_size=1, drop_last=True) as loader:
        assert [len(labels) for _, labels in loader] == [8, 8] and len(loader) == 2
    with rt.TorchLoader(rec, 8, (3, 8, 8), rank=0, world_size=1, drop_last=False) as loader:
        assert len(loader) == 3
    with pytest.raises(ValueError, match="drop_last=True contradicts last_batch='pad'"):
        rt.TorchLoader(rec, 8, (3, 8, 8), drop_last=True, last_batch="pad")


def test_loader_answers_dataloader_names_with_its_own(rec):
    with rt.TorchLoader(rec, 8, (3, 8, 8), rank=0, world_size=1, num_workers=3) as loader:
        assert loader.loader.threads == 3
    with pytest.raises(ValueError, match="threads= or num_workers=, not both"):
        rt.TorchLoader(rec, 8, (3, 8, 8), num_workers=2, threads=2)
    with pytest.raises(ValueError, match=r"no prefetch_factor=.*use prefetch=N"):
        rt.TorchLoader(rec, 8, (3, 8, 8), prefetch_factor=4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_loader_rejects_a_device_it_cannot_use_in_the_constructor(rec):
    with pytest.raises(ValueError, match=r"device='cuda'.*CUDA is not available"):
        rt.TorchLoader(rec, 8, (3, 8, 8), device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_loader_moves_batches_to_an_available_gpu(rec):
    with rt.TorchLoader(rec, 8, (3, 8, 8), rank=0, world_size=1, device="cuda",
                        pin_memory=True) as loader:
        images, labels = next(iter(loader))
    assert images.is_cuda and labels.is_cuda and labels.dtype == torch.int64


def test_dataset_keyword_mistakes_get_precise_errors(rec):
    with pytest.raises(ValueError, match=r"'rezise' \(did you mean 'resize'\?\)"):
        rt.RecordDataset(rec, rezise=32)
    with pytest.raises(ValueError, match=r"'rezise' \(did you mean 'resize'\?\)"):
        rt.RecordDataset(rec, (3, 8, 8), rezise=32)
    for make in (lambda: rt.RecordDataset(rec, 224), lambda: rt.TorchLoader(rec, 8, 224)):
        with pytest.raises(ValueError, match=r"data_shape=224: expected \(channels, height, "
                                             r"width\), e.g. \(3, 224, 224\)"):
            make()


def _readme_torch_example():
    import pathlib
    import re

    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    return re.search(r"<!-- torch-example -->\n```python\n(.*?)```", readme, re.S).group(1)


def _run_readme_example(code, rec, monkeypatch):
    """Run README's torch example on ``rec`` (32 px output); returns its namespace and, per
    epoch, the images it was served (recorded by a TorchLoader subclass patched in)."""
    served = []

    class RecordingLoader(rt.TorchLoader):
        def set_epoch(self, epoch):
            served.append([])
            super().set_epoch(epoch)

        def __iter__(self):
            for images, labels in super().__iter__():
                served[-1].extend(image.cpu().numpy().tobytes() for image in images)
                yield images, labels

    monkeypatch.setattr(rt, "TorchLoader", RecordingLoader)
    code = code.replace('"train.rec"', repr(rec)).replace("(3, 224, 224)", "(3, 32, 32)")
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoEffectWarning)
        exec(compile(code, "README.md", "exec"), namespace)
    return namespace, [sorted(epoch) for epoch in served]  # order-free: shuffle aside


def test_the_readme_torch_example_runs_here(photos_rec, monkeypatch):
    """README's torch example, on this machine's device (CPU here, CUDA where there is one),
    does what it says: its random-resized crop changes the pixels (against the same code
    without it), and each epoch draws new crops (the multiset of images served differs, not
    just their order)."""
    rec, classes = photos_rec
    code = _readme_torch_example()
    assert "random_resized_crop=True, " in code
    namespace, epochs = _run_readme_example(code, rec, monkeypatch)
    assert namespace["labels"].dtype == torch.int64 and namespace["device"] in ("cpu", "cuda")
    assert namespace["images"].device.type == namespace["device"]
    assert torch.isfinite(namespace["loss"])
    assert len(epochs) == 2 and len(epochs[0]) == len(epochs[1]) == 80
    assert epochs[0] != epochs[1], "every epoch served the same images"
    _, plain = _run_readme_example(code.replace("random_resized_crop=True, ", ""), rec,
                                   monkeypatch)
    assert len(plain[0]) == 80
    changed = len(set(epochs[0]) - set(plain[0]))
    assert changed > 70, f"random_resized_crop=True changed only {changed} of 80 images"


def test_dataset_takes_the_loaders_vocabulary_and_refuses_batch_settings(rec):
    """RecordDataset is built from LoaderOptions: the loader's keywords (max_scans, aug_seed,
    label_rule... that its own list lacked) work, batch settings say what to use instead."""
    dataset = rt.RecordDataset(rec, (3, 16, 16), max_scans=7, aug_seed=4, fast_dct=True,
                               label_rule=lambda header, position: np.float32(-position),
                               **AUG)
    assert dataset.options.max_scans == 7 and dataset.options.augment_seed == 4
    assert dataset[5][1].item() == -5.0
    with pytest.raises(ValueError, match="did you mean 'max_scans'"):
        rt.RecordDataset(rec, (3, 16, 16), max_scan=7)
    with pytest.raises(ValueError, match="did you mean 'label_dtype'"):
        rt.RecordDataset(rec, label_dtyp=torch.float32)
    with pytest.raises(ValueError, match=r"no shuffle= .*DataLoader\(shuffle=True\)"):
        rt.RecordDataset(rec, (3, 16, 16), shuffle=True)
    with pytest.raises(ValueError, match="no threads="):
        rt.RecordDataset(rec, threads=2)


def test_dataset_from_loader_options_matches_the_loader(rec):
    """One LoaderOptions serves an ImageLoader and a RecordDataset: same pixels per record."""
    options = LoaderOptions.from_kwargs(4, (3, 16, 16), threads=1, **AUG)
    dataset = rt.RecordDataset(rec, options=options)
    with ImageLoader(rec, options=options) as loader:
        batch = next(iter(loader))
    dataset.set_epoch(0)
    for image, position in zip(batch.images, batch.positions):
        np.testing.assert_array_equal(dataset[int(position)][0].numpy(), image)
    with pytest.raises(TypeError, match="not both"):
        rt.RecordDataset(rec, options=options, seed=3)


def test_random_resized_crop_takes_torchvisions_ranges_in_both_adapters(rec):
    """For the keywords left out: area 0.08-1, aspect 3/4-4/3 (torchvision's RandomResizedCrop),
    not ImageRecordIter's area 1 / aspect 1, with which the crop does nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoEffectWarning)
        dataset = rt.RecordDataset(rec, (3, 16, 16), random_resized_crop=True)
        with rt.TorchLoader(rec, 8, (3, 16, 16), random_resized_crop=True, rank=0,
                            world_size=1, threads=1) as loader:
            loaded = loader.loader.options.augment
    for config in (dataset.options.augment, loaded):
        assert (config.min_random_area, config.max_random_area) == (0.08, 1.0)
        assert (config.min_aspect_ratio, config.max_aspect_ratio) == (0.75, 4 / 3)
        assert config.random_resized_active
    given = rt.RecordDataset(rec, (3, 16, 16), random_resized_crop=True, min_random_area=0.5,
                             min_aspect_ratio=0.9, max_aspect_ratio=1.1).options.augment
    assert (given.min_random_area, given.min_aspect_ratio, given.max_aspect_ratio) == (
        0.5, 0.9, 1.1)


def test_a_setting_without_effect_is_warned_once_per_dataset_not_per_worker_copy(rec):
    with pytest.warns(NoEffectWarning, match=r"fill_value has no effect: pad=0") as caught:
        dataset = rt.RecordDataset(rec, (3, 16, 16), fill_value=0)
    assert len(caught) == 1 and caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoEffectWarning)
        copy = pickle.loads(pickle.dumps(dataset))  # what a DataLoader worker gets
        assert copy[3][0].shape == (3, 16, 16)
