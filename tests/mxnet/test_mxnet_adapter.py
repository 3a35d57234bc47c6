"""recpipe.mx.record_iter.ImageRecordIter: keyword handling here, and against the real mxnet 1.9.1
in its venv (``adapter_checks.py`` run as a subprocess, ``@pytest.mark.mxnet``)."""

import importlib.util
import json
import os
import subprocess
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest

import recpipe
import recpipe.mx.record_iter as rm
import recpipe.mx.keywords as mk
from recpipe.io import IRHeader, pack

from .._photos import pack_training_set
from .conftest import REPO_ROOT

HERE = Path(__file__).resolve().parent
CHECKS = HERE / "adapter_checks.py"
CALL_TIMEOUT = 300
N_IMAGES = 23


def _image(i):
    """A distinct smooth image per index, in varied sizes (some smaller than the output)."""
    h, w = 20 + (i * 7) % 30, 44 - (i * 5) % 26
    ys, xs = np.mgrid[0:h, 0:w]
    return np.stack([(xs * 5 + i * 9) % 256, (ys * 4 + i * 13) % 256,
                     np.full((h, w), (i * 37) % 256)], axis=-1).astype(np.uint8)


@pytest.fixture(scope="module")
def small_rec(tmp_path_factory):
    """``(rec, idx, lst)``: N_IMAGES records labelled i % 5 with ids 100 + i, and an imglist
    giving two labels per id."""
    root = tmp_path_factory.mktemp("adapter")
    rec = root / "small.rec"
    with recpipe.RecordWriter(str(rec)) as writer:
        for i in range(N_IMAGES):
            jpeg = cv2.imencode(".jpg", _image(i), [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
            writer.write(pack(IRHeader(0, float(i % 5), 100 + i, 0), jpeg))
    lst = root / "small.lst"
    lst.write_text("".join(f"{100 + i}\t{i * 2:f}\t{-i - 0.5:f}\timg{i}.jpg\n"
                           for i in reversed(range(N_IMAGES))))
    return str(rec), str(root / "small.idx"), str(lst)


@pytest.fixture(scope="module")
def photos_rec(tmp_path_factory):
    """``(rec, idx, classes)``: 40 photos of each of 5 classes (see tests/_photos.py)."""
    rec = tmp_path_factory.mktemp("photos") / "photos.rec"
    assert pack_training_set(rec, 5, 40) == 200
    return str(rec), str(rec.with_suffix(".idx")), 5


def _run(python, command, spec, workdir):
    spec_path, out_path = Path(workdir) / f"{command}.json", Path(workdir) / f"{command}.out.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))  # test this tree, installed or not
    done = subprocess.run([python, str(CHECKS), command, str(spec_path), str(out_path)],
                          capture_output=True, text=True, timeout=CALL_TIMEOUT, env=env)
    if done.returncode != 0:
        raise AssertionError(f"adapter_checks {command} failed ({done.returncode}):\n"
                             f"{done.stderr[-4000:]}")
    return json.loads(out_path.read_text())


# -- without mxnet ----------------------------------------------------------------------------


def test_module_imports_without_mxnet_and_the_classes_need_it():
    assert "ImageRecordIter" in rm.__all__
    if importlib.util.find_spec("mxnet") is not None:
        pytest.skip("mxnet is importable here")
    with pytest.raises(ImportError, match=r"recpipe\[mxnet\]"):
        rm.ImageRecordIter  # noqa: B018


def test_keywords_translate_to_the_loader():
    loader, options, imglist = mk.translate(dict(
        path_imgrec="a.rec", path_imgidx="a.idx", data_shape="(3,32,32)", batch_size="8",
        preprocess_threads="3", prefetch_buffer=2, shuffle="True", seed=5, part_index=1,
        num_parts=2, round_batch=False, rand_mirror=True, mean_r=1.5, data_name="img",
        path_imglist="a.lst", verbose=False, ctx="cpu", seed_aug=3))
    assert loader["url"] == "a.rec" and loader["index_url"] == "a.idx"
    assert (loader["batch_size"], loader["threads"], loader["prefetch"]) == (8, 3, 2)
    assert (loader["shuffle"], loader["seed"], loader["part_index"], loader["num_parts"]) == (
        True, 5, 1, 2)
    assert loader["dtype"] == "float32" and loader["last_batch"] == "pad"
    assert loader["rand_mirror"] is True and loader["mean_r"] == 1.5
    assert "verbose" not in loader and "ctx" not in loader and "seed_aug" not in loader
    assert (options.data_name, options.label_name, options.batch_size) == ("img", "softmax_label",
                                                                           8)
    assert imglist == "a.lst"


def test_shuffle_chunk_size_turns_on_the_block_shuffle():
    base = dict(path_imgrec="a.rec", data_shape=(3, 8, 8), batch_size=2)
    assert mk.translate(dict(base, shuffle_chunk_size=64))[0]["shuffle"] == "block"
    assert mk.translate(dict(base, shuffle_chunk_size=64, shuffle=True))[0]["shuffle"] is True
    assert mk.translate(base)[0]["shuffle"] is False


def test_unknown_keywords_warn_with_a_suggestion():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mk.translate(dict(path_imgrec="a.rec", data_shape=(3, 8, 8), batch_size=2,
                           rand_mirorr=True))
    assert len(caught) == 1 and caught[0].category is rm.UnknownKeywordWarning
    assert "'rand_mirorr'" in str(caught[0].message) and "'rand_mirror'" in str(caught[0].message)


@pytest.mark.parametrize("extra, error, name", [
    ({"dtype": "int8"}, NotImplementedError, "int8"),
    ({"dtype": "float64"}, ValueError, "float64"),
    ({"aug_seq": "aug_default,det_aug_default"}, NotImplementedError, "aug_seq"),
    ({"std_a": 2}, NotImplementedError, "std_a"),
    ({"mean_img": "m.nd", "dtype": "uint8"}, ValueError, "mean_img"),
    ({"round_batch": "maybe"}, ValueError, "round_batch"),
    ({"data_shape": "4,8,8"}, NotImplementedError, "4-channel"),
    ({"data_shape": "3,x,8"}, ValueError, "data_shape"),
])
def test_keywords_we_cannot_honour_raise_naming_them(extra, error, name):
    with pytest.raises(error, match=name):
        mk.translate(dict(dict(path_imgrec="a.rec", data_shape=(3, 8, 8), batch_size=2), **extra))


def test_required_keywords():
    with pytest.raises(ValueError, match="path_imgrec"):
        mk.translate(dict(data_shape=(3, 8, 8), batch_size=2))
    with pytest.raises(ValueError, match="batch_size"):
        mk.translate(dict(path_imgrec="a.rec", data_shape=(3, 8, 8)))


def test_read_imglist(tmp_path):
    lst = tmp_path / "x.lst"
    lst.write_text("7\t1.000000\t2.000000\ta b.jpg\n\n3 4.5 6 c.jpg\n")
    single = rm.read_imglist(str(lst), 1)
    assert single == {7: 1.0, 3: 4.5}
    double = rm.read_imglist(str(lst), 2)
    assert double[7].tolist() == [1.0, 2.0] and double[3].tolist() == [4.5, 6.0]
    with pytest.raises(ValueError, match=r"line 1"):
        rm.read_imglist(str(lst), 3)  # MXNet would read the path as 0.0


# -- against mxnet 1.9.1 ----------------------------------------------------------------------


@pytest.mark.mxnet
def test_validation_batches_match_mxnet_pixel_for_pixel(mxnet_python, small_rec, photos_rec,
                                                        tmp_path):
    rec, idx, _ = small_rec
    prec, pidx, _ = photos_rec
    val = dict(preprocess_threads=2, mean_r=123.68, mean_g=116.28, mean_b=103.53,
               std_r=58.395, std_g=57.12, std_b=57.375)
    runs = [
        dict(val, path_imgrec=rec, path_imgidx=idx, data_shape=[3, 24, 24], batch_size=5,
             resize=28),
        dict(val, path_imgrec=prec, path_imgidx=pidx, data_shape=[3, 56, 56], batch_size=16,
             resize=64, dct_scaling=False),
        dict(path_imgrec=rec, path_imgidx=idx, data_shape=[1, 20, 20], batch_size=7,
             dtype="uint8", round_batch=False),
        # GluonCV's ImageNet validation iterator: resize 256, center crop 224, mean/std
        dict(val, path_imgrec=prec, path_imgidx=pidx, data_shape=[3, 224, 224], batch_size=50,
             resize=256),
    ]
    npz = tmp_path / "parity.npz"
    result = _run(mxnet_python, "parity", {"runs": runs, "npz": str(npz)}, tmp_path)
    arrays = np.load(npz)
    for i, run in enumerate(result["runs"]):
        ours, theirs = arrays[f"ours_data_{i}"], arrays[f"theirs_data_{i}"]
        # with round_batch=False MXNet's last batch says pad=0 and ends in stale data: cut it
        theirs, their_labels = theirs[:len(ours)], arrays[f"theirs_label_{i}"][:len(ours)]
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        # validation mode: MXNet's pixels exactly (float32 rounding of the normalisation apart)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)
        assert np.array_equal(arrays[f"ours_label_{i}"], their_labels)
        assert run["ours_provide"] == run["theirs_provide"]
    # MXNet reports pad=0 on the last batch with round_batch=False (its bug); ours counts it
    assert result["runs"][0]["ours_pads"] == result["runs"][0]["theirs_pads"] == [0] * 4 + [2]
    assert result["runs"][2]["ours_pads"] == [0] * 3 + [5]


@pytest.mark.mxnet
def test_dataiter_contract(mxnet_python, small_rec, tmp_path):
    rec, idx, lst = small_rec
    facts = _run(mxnet_python, "contract", {"rec": rec, "idx": idx, "lst": lst,
                                            "workdir": str(tmp_path)}, tmp_path)
    epochs = facts["epochs"]
    expected = [float(i % 5) for i in range(N_IMAGES)] + [0.0, 1.0]  # round_batch wraps
    flat = [x for batch in epochs["first"] for x in batch]
    assert flat == expected
    assert epochs["after_end"] == []  # exhausted until reset()
    assert epochs["second"] == epochs["first"] == epochs["third"]  # reset() really rewinds

    batch = facts["batch"]
    assert batch["is_dataiter"]
    assert batch["provide"] == [[["img", [5, 3, 24, 24], "float32"]],
                                [["cls", [5], "float32"]]]
    assert [b["pad"] for b in batch["batches"]] == [0, 0, 0, 0, 2]
    assert [x for b in batch["batches"] for x in b["index"]] == list(range(N_IMAGES)) + [0, 1]
    assert {b["index_dtype"] for b in batch["batches"]} == {"uint64"}
    assert {tuple(b["shape"]) for b in batch["batches"]} == {(5, 3, 24, 24)}
    assert {b["context"] for b in batch["batches"]} == {"cpu(0)"}
    assert batch["uint8"]["provide"] == [["data", [5, 3, 24, 24], "uint8"]]
    assert batch["uint8"]["dtype"] == "uint8" and batch["uint8"]["max"] > 100  # raw pixels

    imglist = facts["imglist"]
    assert imglist["labels"] == [[i * 2.0, -i - 0.5] for i in range(N_IMAGES)]
    assert imglist["provide_label"] == [["softmax_label", [5, 2], "float32"]]

    errors = facts["errors"]
    # argument errors are MXNetError (as MXNet raises) and still ValueError/NotImplementedError
    for name in ("int8", "aug_seq", "mean_a", "rgba"):
        assert errors[name][0] == "MXNetNotImplementedError", name
        assert errors[name][2:] == [True, False, True], name
    for name in ("bad_dtype", "bad_bool"):
        assert errors[name][0] == "MXNetValueError" and errors[name][2:] == [True, True, False]
    assert "int8" in errors["int8"][1] and "mean_a" in errors["mean_a"][1]
    assert [w[0] for w in errors["warnings"]] == ["UnknownKeywordWarning"]
    assert "rand_mirorr" in errors["warnings"][0][1]
    assert len(errors["mxnet_keywords"]) > 50 and errors["unknown_to_us"] == []

    resume = facts["resume"]
    assert resume["rest"] == resume["again"] == 3 and resume["same"]
    assert resume["state"]["batch"] == 2

    for case in ("given", "computed"):
        mean = facts["mean_img"][case]
        assert mean["spread"] > 1  # the comparison is not between two constant arrays
        assert mean["max_diff"] <= 1.01  # one pixel level (scale 0.5 / std 2..4 make it less)
    assert facts["mean_img"]["computed"]["mean_file_diff"] <= 1e-3


@pytest.mark.mxnet
def test_module_training_loss_goes_down(mxnet_python, photos_rec, tmp_path):
    rec, idx, classes = photos_rec
    result = _run(mxnet_python, "train", {"rec": rec, "idx": idx, "classes": classes,
                                          "epochs": 8, "shape": [3, 32, 32], "batch_size": 20},
                  tmp_path)
    losses = result["losses"]
    assert result["batches"] == 10 and len(losses) == 8
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.85 * losses[0], losses


@pytest.mark.mxnet
def test_seed_aug_keys_the_augmentation_stream(mxnet_python, small_rec, tmp_path):
    rec, idx, _ = small_rec
    base = dict(path_imgrec=rec, path_imgidx=idx, data_shape=[3, 20, 20], batch_size=5,
                rand_crop=True, rand_mirror=True, resize=26, brightness=0.3,
                preprocess_threads=2, shuffle=True, seed=7)
    npz = tmp_path / "seed_aug.npz"
    result = _run(mxnet_python, "seed_aug", {"base": base, "npz": str(npz)}, tmp_path)
    arrays = np.load(npz)
    assert np.array_equal(arrays["a1"], arrays["a1_again"])
    assert np.array_equal(arrays["a1"], arrays["a1_threads"])  # whatever the thread count
    assert not np.array_equal(arrays["a1"], arrays["a2"])
    assert not np.array_equal(arrays["a1"], arrays["none"])
    # seed_aug changes the augmentation only: the shuffle (seed) is the same
    assert len({tuple(labels) for labels in result["labels"].values()}) == 1


def _cifar_rec(path, per_class=6):
    with recpipe.RecordWriter(str(path)) as writer:
        for i in range(10 * per_class):
            img = np.full((32, 32, 3), (i * 23) % 256, np.uint8)
            img[:, :16] = (i * 41) % 256
            writer.write(pack(IRHeader(0, float(i % 10), i, 0),
                              cv2.imencode(".png", img)[1].tobytes()))
    return str(path)


@pytest.mark.mxnet
def test_cifar_style_rec_with_a_mean_image_and_jitter(mxnet_python, tmp_path):
    rec = _cifar_rec(tmp_path / "cifar.rec")
    facts = _run(mxnet_python, "cifar_mean", {"rec": rec, "workdir": str(tmp_path)}, tmp_path)
    assert facts["mxnet_wrote_mean"]
    assert facts["counts"] == {str(c): 12 for c in range(10)}  # every record once per epoch
    for mean, std, finite in facts["values"]:
        assert finite and abs(mean) < 30 and std > 1
    assert facts["jitter_changes"]
    assert facts["ours_mean_shape"] == [3, 28, 28]
