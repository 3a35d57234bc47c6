import threading

import cv2
import numpy as np
import pytest

import recpipe
from recpipe._optional import extension
from recpipe.decode import loader as loader_module
from recpipe.decode.loader import ImageLoader
from recpipe.decode.order import epoch_order
from recpipe.io import IRHeader, pack

N_IMAGES = 20


def _image(i, shape=(48, 64)):
    """A distinct smooth image per index (smooth so JPEG round trips stay close)."""
    ys, xs = np.mgrid[0:shape[0], 0:shape[1]]
    img = np.stack([(xs * 3 + i * 11) % 256, (ys * 4 + i * 7) % 256,
                    np.full(shape, (i * 37) % 256)], axis=-1).astype(np.uint8)
    return img


def _jpeg(rgb, quality=95):
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR),
                           [cv2.IMWRITE_JPEG_QUALITY, quality])
    assert ok
    return buf.tobytes()


@pytest.fixture
def rec(tmp_path):
    url = str(tmp_path / "data.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(N_IMAGES):
            writer.write(pack(IRHeader(0, float(i), i, 0), _jpeg(_image(i))))
    return url


def _collect(loader, pads=None):
    images, labels = [], []
    for batch in loader:
        batch_images, batch_labels = batch
        images.append(batch_images.copy())
        labels.append(batch_labels.copy())
        if pads is not None:
            pads.append(batch.pad)
    return images, labels


def test_batches_in_file_order_with_labels(rec):
    with ImageLoader(rec, 8, (3, 48, 64), threads=3) as loader:
        assert len(loader) == 3
        pads = []
        images, labels = _collect(loader, pads)
    assert [im.shape for im in images] == [(8, 3, 48, 64)] * 3
    assert images[0].dtype == np.uint8
    flat = np.concatenate(labels)
    assert list(flat[:N_IMAGES]) == list(range(N_IMAGES))
    assert pads == [0, 0, 4]
    assert list(flat[N_IMAGES:]) == [0, 1, 2, 3]  # padding wraps to the start
    # pixels: RGB, CHW, close to the source image (JPEG at quality 95)
    got = images[0][5].transpose(1, 2, 0).astype(int)
    assert np.abs(got - _image(5)).mean() < 3


def test_val_resize_center_crop_matches_a_direct_reference(rec):
    with ImageLoader(rec, 4, (3, 32, 32), resize=40, dct_scaling=False) as loader:
        images, _ = _collect(loader)
    data = recpipe.RecordReader(rec)[2]
    bgr = cv2.imdecode(np.frombuffer(recpipe.unpack(data)[1], np.uint8), cv2.IMREAD_COLOR)
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    resized = cv2.resize(rgb, (64 * 40 // 48, 40), interpolation=cv2.INTER_LINEAR)
    y0, x0 = (40 - 32) // 2, (resized.shape[1] - 32) // 2
    expected = resized[y0:y0 + 32, x0:x0 + 32]
    got = images[0][2].transpose(1, 2, 0).astype(int)
    assert np.abs(got - expected).max() <= 2


def test_augmentation_is_deterministic_whatever_the_thread_count(rec):
    kwargs = dict(random_resized_crop=True, min_random_area=0.3, max_aspect_ratio=4 / 3,
                  min_aspect_ratio=3 / 4, rand_mirror=True, shuffle=True, seed=7)
    runs = []
    for threads in (1, 4):
        with ImageLoader(rec, 6, (3, 24, 24), threads=threads, **kwargs) as loader:
            runs.append([_collect(loader) for _ in range(2)])
    (one_e0, one_e1), (four_e0, four_e1) = runs
    for a, b in ((one_e0, four_e0), (one_e1, four_e1)):
        assert all(np.array_equal(x, y) for x, y in zip(a[0], b[0]))
        assert all(np.array_equal(x, y) for x, y in zip(a[1], b[1]))
    # the next epoch reshuffles and re-draws augmentation
    assert not all(np.array_equal(x, y) for x, y in zip(one_e0[1], one_e1[1]))


def test_parts_have_equal_batch_counts_and_cover_the_data(rec):
    seen = []
    counts = set()
    for part in range(3):
        with ImageLoader(rec, 4, (3, 16, 16), part_index=part, num_parts=3, shuffle=True,
                         seed=1) as loader:
            _, labels = _collect(loader)
        counts.add(len(labels))
        seen.extend(np.concatenate(labels).tolist())
    assert len(counts) == 1
    assert set(seen) == set(range(N_IMAGES))


@pytest.mark.parametrize("policy,batches,last", [("drop", 2, 8), ("partial", 3, 4), ("pad", 3, 8)])
def test_last_batch_policies(rec, policy, batches, last):
    with ImageLoader(rec, 8, (3, 16, 16), last_batch=policy) as loader:
        images, _ = _collect(loader)
    assert len(images) == batches
    assert len(images[-1]) == last


def test_float32_normalisation_and_nhwc(rec):
    mean, std, scale = (10.0, 20.0, 30.0), (2.0, 4.0, 8.0), 0.5
    common = dict(resize=32, dct_scaling=False)
    with ImageLoader(rec, 4, (3, 32, 32), **common) as loader:
        raw, _ = _collect(loader)
    with ImageLoader(rec, 4, (3, 32, 32), dtype="float32", layout="NHWC", mean_r=mean[0],
                     mean_g=mean[1], mean_b=mean[2], std_r=std[0], std_g=std[1], std_b=std[2],
                     scale=scale, **common) as loader:
        norm, _ = _collect(loader)
    assert norm[0].shape == (4, 32, 32, 3) and norm[0].dtype == np.float32
    expected = (raw[0].transpose(0, 2, 3, 1) - np.array(mean)) * scale / np.array(std)
    np.testing.assert_allclose(norm[0], expected, rtol=1e-5, atol=1e-4)


def test_grayscale_output(rec):
    with ImageLoader(rec, 4, (1, 16, 16), resize=16) as loader:
        images, _ = _collect(loader)
    assert images[0].shape == (4, 1, 16, 16)


def test_multi_labels(tmp_path):
    url = str(tmp_path / "multi.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(5):
            writer.write(pack(IRHeader(0, [i, i + 0.5, 9], i, 0), _jpeg(_image(i))))
    with ImageLoader(url, 5, (3, 16, 16), label_width=2) as loader:
        _, labels = _collect(loader)
    np.testing.assert_array_equal(labels[0], [[i, i + 0.5] for i in range(5)])
    with ImageLoader(url, 5, (3, 16, 16), label_width=4) as loader:
        with pytest.raises(recpipe.RecordFormatError, match="3 packed labels"):
            _collect(loader)


@pytest.fixture
def rec_with_bad_image(tmp_path):
    url = str(tmp_path / "bad.rec")
    with recpipe.RecordWriter(url) as writer:
        for i in range(10):
            body = b"\xff\xd8 this is not a jpeg" if i == 3 else _jpeg(_image(i))
            writer.write(pack(IRHeader(0, float(i), i, 0), body))
    return url


def test_bad_image_raises_with_path_and_record(rec_with_bad_image):
    with ImageLoader(rec_with_bad_image, 5, (3, 16, 16)) as loader:
        with pytest.raises(recpipe.DecodeError) as info:
            _collect(loader)
    assert "bad.rec" in str(info.value) and "record 3" in str(info.value)
    assert info.value.__traceback__ is not None


def test_bad_image_skip_and_replace_policies(rec_with_bad_image):
    """The bad record sits inside a run of the native decoder (when it is built): the run
    reports it and the policy applies to it alone."""
    with ImageLoader(rec_with_bad_image, 5, (3, 16, 16), on_error="skip") as loader:
        assert loader.records.native == (extension("_batch") is not None)
        images, labels = _collect(loader)
        assert loader.stats()["skipped"] == 1
    assert [len(b) for b in images] == [4, 5]
    assert 3.0 not in np.concatenate(labels)
    with ImageLoader(rec_with_bad_image, 5, (3, 16, 16), on_error="replace") as loader:
        images, labels = _collect(loader)
        assert loader.stats()["replaced"] == 1
    assert [len(b) for b in images] == [5, 5]
    assert np.concatenate(labels).tolist() == [0, 1, 2, 4, 4, 5, 6, 7, 8, 9]


def test_set_threads_while_running_and_stats(rec):
    with ImageLoader(rec, 4, (3, 16, 16), threads=1) as loader:
        it = iter(loader)
        next(it)
        loader.set_threads(3)
        assert loader.threads == 3
        rest = list(it)
        stats = loader.stats()
    assert len(rest) == 4
    assert stats["images"] == N_IMAGES and stats["batches"] == 5
    assert set(stats["stage_seconds"]) == {"read", "decode", "augment", "batch"}
    assert stats["stage_seconds"]["decode"] > 0 and stats["samples"] >= N_IMAGES


def test_close_joins_threads_even_when_the_loop_breaks(rec):
    with pytest.raises(KeyboardInterrupt):
        with ImageLoader(rec, 2, (3, 16, 16), threads=3) as loader:
            for _ in loader:
                raise KeyboardInterrupt
    assert not [t for t in threading.enumerate() if t.name.startswith("recpipe-decode")]
    with pytest.raises(RuntimeError, match="closed"):
        iter(loader)


def test_new_epoch_supersedes_the_old_one(rec):
    with ImageLoader(rec, 4, (3, 16, 16)) as loader:
        first = iter(loader)
        next(first)
        second = iter(loader)
        assert len(list(second)) == 5
        with pytest.raises((RuntimeError, StopIteration)):
            next(first)


def test_memory_url(rec):
    import fsspec

    with open(rec, "rb") as f:
        fsspec.filesystem("memory").pipe("/loader/data.rec", f.read())
    with ImageLoader("memory://loader/data.rec", 10, (3, 16, 16)) as loader:
        _, labels = _collect(loader)
    assert np.concatenate(labels).tolist() == list(range(N_IMAGES))


def _by_record(loader):
    """``{record position: (image, label)}`` of one epoch."""
    samples = {}
    for batch in loader:
        images, labels = batch
        for position, image, label in zip(batch.positions, images, labels):
            samples[int(position)] = (image.copy(), float(label))
    return samples


@pytest.mark.parametrize("shuffle", ["block", "full"])
def test_a_remote_file_gives_the_local_files_samples(rec, shuffle):
    """memory:// runs take the native path too (payloads handed to recpipe._batch): every record
    gets the same pixels and label as from the local file (a block shuffle's order differs:
    remote runs are cut by bytes)."""
    import fsspec

    fs = fsspec.filesystem("memory")
    for suffix in (".rec", ".idx"):
        with open(rec[:-4] + suffix, "rb") as f:
            fs.pipe("/remote-loader/data" + suffix, f.read())
    settings = dict(shuffle=shuffle, seed=3, rand_crop=True, rand_mirror=True, threads=2,
                    run_bytes=4096)
    try:
        with ImageLoader(rec, 8, (3, 32, 40), **settings) as local, \
                ImageLoader("memory://remote-loader/data.rec", 8, (3, 32, 40),
                            **settings) as remote:
            assert remote.records.native == local.records.native
            for _ in range(2):  # two epochs
                want, got = _by_record(local), _by_record(remote)
                assert sorted(want) == sorted(got) == list(range(N_IMAGES))
                for position, (image, label) in want.items():
                    np.testing.assert_array_equal(got[position][0], image)
                    assert got[position][1] == label
    finally:
        fs.rm("/remote-loader", recursive=True)


def test_bad_arguments(rec):
    with pytest.raises(ValueError):
        ImageLoader(rec, 4, (3, 16, 16), on_error="ignore")
    with pytest.raises(ValueError):
        ImageLoader(rec, 0, (3, 16, 16))
    with pytest.raises(ValueError):
        ImageLoader(rec, 4, (5, 16, 16))


def test_resume_mid_epoch_yields_exactly_the_remaining_batches(rec):
    kwargs = dict(random_resized_crop=True, min_random_area=0.3, rand_mirror=True,
                  shuffle=True, seed=5)
    with ImageLoader(rec, 3, (3, 16, 16), **kwargs) as loader:
        list(loader)                      # epoch 0
        uninterrupted = _collect(loader)  # epoch 1
    with ImageLoader(rec, 3, (3, 16, 16), **kwargs) as loader:
        list(loader)
        it = iter(loader)
        head = [next(it)[1].copy() for _ in range(2)]
        state = loader.state_dict()
    assert state["epoch"] == 1 and state["batch"] == 2
    with ImageLoader(rec, 3, (3, 16, 16), threads=3, **kwargs) as resumed:
        resumed.load_state_dict(state)
        tail = _collect(resumed)
        assert resumed.state_dict()["epoch"] == 2 and resumed.state_dict()["batch"] == 0
    assert all(np.array_equal(a, b) for a, b in zip(head, uninterrupted[1][:2]))
    assert len(tail[0]) == len(uninterrupted[0]) - 2
    assert all(np.array_equal(a, b) for a, b in zip(tail[0], uninterrupted[0][2:]))
    assert all(np.array_equal(a, b) for a, b in zip(tail[1], uninterrupted[1][2:]))


def test_batch_at_epoch_and_index_is_the_batch_iteration_delivers(rec, monkeypatch):
    """``loader.batch(epoch, index)``, the public way to one batch (``recpipe view``'s), gives
    the pixels, labels, pad and positions of iterating to it, leaves iteration where it was,
    and plans an epoch once for batch after batch of it."""
    kwargs = dict(random_resized_crop=True, min_random_area=0.3, rand_mirror=True,
                  shuffle=True, seed=5)
    with ImageLoader(rec, 3, (3, 16, 16), threads=2, **kwargs) as loader:
        iterated = [[(b.images.copy(), b.labels.copy(), b.pad, np.array(b.positions))
                     for b in loader] for _ in range(2)]
    with ImageLoader(rec, 3, (3, 16, 16), threads=3, **kwargs) as loader:
        it = iter(loader)
        next(it)  # epoch 0 under way
        for epoch, index in ((1, 6), (1, 0), (0, 3), (1, 2)):
            got = loader.batch(epoch, index)
            images, labels, pad, positions = iterated[epoch][index]
            np.testing.assert_array_equal(got.images, images)
            np.testing.assert_array_equal(got.labels, labels)
            assert got.pad == pad and np.array_equal(got.positions, positions)
        made = []
        monkeypatch.setattr(loader_module, "epoch_order",
                            lambda *a, **k: made.append(k["epoch"]) or epoch_order(*a, **k))
        for index in (4, 5, 1):
            loader.batch(1, index)
        assert made == []  # epoch 1 was planned already: its order is not made again
        loader.batch(0, 1)
        loader.batch(0, 2)
        assert made == [0]
        rest = [b.images.copy() for b in it]  # the running epoch goes on, untouched
        assert all(np.array_equal(a, b[0]) for a, b in zip(rest, iterated[0][1:]))
        assert len(rest) == len(iterated[0]) - 1
        with pytest.raises(IndexError, match="no batch 7"):
            loader.batch(0, 7)
        with pytest.raises(ValueError, match="epoch=-1"):
            loader.batch(-1, 0)
    with pytest.raises(RuntimeError, match="closed"):
        loader.batch(0, 0)


def test_resume_refuses_a_different_configuration(rec):
    with ImageLoader(rec, 3, (3, 16, 16), seed=1) as loader:
        state = loader.state_dict()
    with ImageLoader(rec, 4, (3, 16, 16), seed=1) as other:
        with pytest.raises(ValueError, match="batch_size"):
            other.load_state_dict(state)


def test_default_dtype_follows_normalisation(rec):
    """As ImageRecordIter: mean/std/scale without a dtype give float32; raw pixels stay uint8."""
    with ImageLoader(rec, 4, (3, 24, 24), threads=1, mean_r=123.0, std_r=58.0) as loader:
        images, _ = next(iter(loader))
        assert images.dtype == np.float32
    with ImageLoader(rec, 4, (3, 24, 24), threads=1, scale=1 / 255) as loader:
        assert next(iter(loader))[0].dtype == np.float32
    with ImageLoader(rec, 4, (3, 24, 24), threads=1) as loader:
        raw, _ = next(iter(loader))
        assert raw.dtype == np.uint8
    with ImageLoader(rec, 4, (3, 24, 24), threads=1, mean_r=10.0, dtype="float32") as loader:
        explicit, _ = next(iter(loader))
    assert np.array_equal(images[:, 1:], explicit[:, 1:])
    with pytest.raises(ValueError, match="uint8"):
        ImageLoader(rec, 4, (3, 24, 24), threads=1, mean_r=10.0, dtype="uint8")


def test_a_misspelt_keyword_gets_a_suggestion_before_the_file_opens(tmp_path):
    missing = str(tmp_path / "not-there.rec")  # never opened: the keyword is checked first
    with pytest.raises(ValueError, match="did you mean 'shuffle'"):
        ImageLoader(missing, 4, (3, 24, 24), shufle=True)
    with pytest.raises(ValueError, match="did you mean 'rand_mirror'"):
        ImageLoader(missing, 4, (3, 24, 24), rand_mirorr=True)
    with pytest.raises(NotImplementedError, match="mean_img"):
        ImageLoader(missing, 4, (3, 24, 24), mean_img="m.nd")
