"""Run by the *mxnet venv's* python for tests/mxnet/test_mxnet_adapter.py:
``adapter_checks.py COMMAND SPEC OUT``; imports mxnet 1.9.1 and ``recpipe.mx.record_iter`` side by
side.

SPEC and OUT are JSON files; arrays travel in ``.npz`` files named in the spec. Commands:

- ``parity``: ``{"runs": [kwargs], "npz": path}`` -> each run through ``mx.io.ImageRecordIter``
  and ``recpipe.mx.record_iter.ImageRecordIter``; saves ``ours_data_<i>``, ``theirs_data_<i>``,
  ``ours_label_<i>``, ``theirs_label_<i>`` (one epoch, padding cut) and returns pads and the
  iterators' ``provide_data``/``provide_label``.
- ``contract``: ``{"rec", "idx", "lst", "workdir"}`` -> facts about our iterator's DataIter
  behaviour (epochs, reset, pad, index, names, imglist, errors, resume, mean_img).
- ``train``: ``{"rec", "idx", "classes", "epochs", "shape", "batch_size"}`` -> per-epoch mean
  training cross-entropy of an ``mx.mod.Module`` fed by our iterator.
"""

import json
import os
import re
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")

import mxnet as mx  # noqa: E402

import recpipe.mx.record_iter as rm  # noqa: E402

warnings.simplefilter("default")


def desc(descs):
    return [[d.name, list(d.shape), np.dtype(d.dtype).name] for d in descs]


def one_epoch(it):
    data, labels, pads = [], [], []
    for batch in it:
        keep = batch.data[0].shape[0] - batch.pad
        data.append(batch.data[0].asnumpy()[:keep])
        labels.append(batch.label[0].asnumpy()[:keep])
        pads.append(int(batch.pad))
    return np.concatenate(data), np.concatenate(labels), pads


def parity(spec):
    arrays, runs = {}, []
    for i, kwargs in enumerate(spec["runs"]):
        kwargs = dict(kwargs, data_shape=tuple(kwargs["data_shape"]))
        ours = rm.ImageRecordIter(**kwargs)
        mx_kwargs = {k: v for k, v in kwargs.items() if k in rm.MXNET_KEYWORDS}
        theirs = mx.io.ImageRecordIter(**mx_kwargs)
        result = {"ours_provide": [desc(ours.provide_data), desc(ours.provide_label)],
                  "theirs_provide": [desc(theirs.provide_data), desc(theirs.provide_label)]}
        for name, it in (("ours", ours), ("theirs", theirs)):
            data, labels, pads = one_epoch(it)
            arrays[f"{name}_data_{i}"] = data
            arrays[f"{name}_label_{i}"] = labels
            result[f"{name}_pads"] = pads
        ours.close()
        del theirs
        runs.append(result)
    np.savez(spec["npz"], **arrays)
    return {"runs": runs}


def labels_of_epoch(it):
    out = []
    for batch in it:
        out.append(batch.label[0].asnumpy().tolist())
    return out


def epochs_and_reset(base):
    it = rm.ImageRecordIter(**base)
    it.reset()  # before anything was taken: a no-op
    first = labels_of_epoch(it)
    after_end = labels_of_epoch(it)  # exhausted until reset
    it.reset()
    second = labels_of_epoch(it)
    it.reset()
    next(it)
    it.reset()  # mid-epoch: starts the next epoch from its beginning
    third = labels_of_epoch(it)
    it.close()
    return {"first": first, "after_end": after_end, "second": second, "third": third}


def batch_facts(base):
    it = rm.ImageRecordIter(**dict(base, data_name="img", label_name="cls"))
    facts = {"is_dataiter": isinstance(it, mx.io.DataIter),
             "provide": [desc(it.provide_data), desc(it.provide_label)], "batches": []}
    while it.iter_next():  # the DataIter protocol: iter_next, then get*
        data, label = it.getdata()[0], it.getlabel()[0]
        facts["batches"].append({"pad": int(it.getpad()), "index": it.getindex().tolist(),
                                 "index_dtype": np.dtype(it.getindex().dtype).name,
                                 "shape": list(data.shape), "label": label.asnumpy().tolist(),
                                 "context": str(data.context), "dtype": np.dtype(data.dtype).name})
    it.close()
    uint8 = rm.ImageRecordUInt8Iter(**base)
    batch = next(uint8)
    facts["uint8"] = {"provide": desc(uint8.provide_data),
                      "dtype": np.dtype(batch.data[0].dtype).name,
                      "max": float(batch.data[0].asnumpy().max())}
    uint8.close()
    return facts


def imglist_facts(base, lst):
    it = rm.ImageRecordIter(**dict(base, path_imglist=lst, label_width=2))
    labels = []
    for batch in it:
        keep = batch.data[0].shape[0] - batch.pad
        labels.extend(batch.label[0].asnumpy()[:keep].tolist())
    facts = {"labels": labels, "provide_label": desc(it.provide_label)}
    it.close()
    return facts


def error_facts(base):
    errors = {}
    cases = {"int8": {"dtype": "int8"}, "aug_seq": {"aug_seq": "aug_default,det_aug_default"},
             "mean_a": {"mean_a": 3.0}, "rgba": {"data_shape": (4, 24, 24)},
             "bad_dtype": {"dtype": "float64"}, "bad_bool": {"round_batch": "maybe"}}
    for name, extra in cases.items():
        try:
            rm.ImageRecordIter(**dict(base, **extra)).close()
            errors[name] = None
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors[name] = [type(exc).__name__, str(exc), isinstance(exc, mx.base.MXNetError),
                            isinstance(exc, ValueError), isinstance(exc, NotImplementedError)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rm.ImageRecordIter(**dict(base, rand_mirorr=True, verbose=False)).close()
    errors["warnings"] = [[w.category.__name__, str(w.message)] for w in caught]
    doc = mx.io.ImageRecordIter.__doc__
    errors["mxnet_keywords"] = re.findall(r"^(\w+) : ", doc, re.M)
    errors["unknown_to_us"] = sorted(set(errors["mxnet_keywords"]) - rm.MXNET_KEYWORDS)
    return errors


def resume_facts(base):
    kwargs = dict(base, shuffle=True, seed=3, rand_crop=True, rand_mirror=True, resize=30)
    it = rm.ImageRecordIter(**kwargs)
    next(it)
    next(it)
    state = it.state_dict()
    rest = [b.data[0].asnumpy() for b in it]
    it.reset()
    rest_next_epoch = [b.data[0].asnumpy() for b in it][:1]
    it.close()
    resumed = rm.ImageRecordIter(**kwargs)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    again = [b.data[0].asnumpy() for b in resumed]
    resumed.reset()
    again_next_epoch = [b.data[0].asnumpy() for b in resumed][:1]
    resumed.close()
    same = (len(rest) == len(again) and all(np.array_equal(a, b) for a, b in zip(rest, again))
            and np.array_equal(rest_next_epoch[0], again_next_epoch[0]))
    return {"state": state, "rest": len(rest), "again": len(again), "same": bool(same)}


def mean_img_facts(base, workdir):
    """Our iterator and MXNet's with the same mean image file: given, and computed when missing."""
    normalize = dict(std_r=2.0, std_g=3.0, std_b=4.0, scale=0.5)
    kwargs = dict(base, resize=30, dct_scaling=False)
    rng = np.random.default_rng(0)
    shape = tuple(base["data_shape"])
    given = os.path.join(workdir, "given_mean.nd")
    mx.nd.save(given, {"mean_img": mx.nd.array(rng.uniform(0, 255, shape).astype(np.float32))})
    facts = {}
    # MXNet computes a missing mean image from std/scale-normalised pixels, then subtracts it
    # from raw ones (a unit mismatch): compare computed files with std = scale = 1 only
    for name, path in (("given", given), ("computed", os.path.join(workdir, "ours_mean.nd"))):
        if name == "given":
            kwargs.update(normalize)
        else:
            kwargs = {k: v for k, v in kwargs.items() if k not in normalize}
        ours = rm.ImageRecordIter(**dict(kwargs, mean_img=path))
        ours_data = one_epoch(ours)[0]
        ours.close()
        theirs_path = given if name == "given" else os.path.join(workdir, "theirs_mean.nd")
        mx_kwargs = {k: v for k, v in kwargs.items() if k in rm.MXNET_KEYWORDS}
        theirs = mx.io.ImageRecordIter(**dict(mx_kwargs, mean_img=theirs_path))
        theirs_data = one_epoch(theirs)[0]
        del theirs
        facts[name] = {"max_diff": float(np.abs(ours_data - theirs_data).max()),
                       "spread": float(ours_data.std())}
        if name == "computed":
            ours_mean = list(mx.nd.load(path).values())[0].asnumpy()
            theirs_mean = list(mx.nd.load(theirs_path).values())[0].asnumpy()
            facts[name]["mean_file_diff"] = float(np.abs(ours_mean - theirs_mean).max())
    return facts


def contract(spec):
    base = {"path_imgrec": spec["rec"], "path_imgidx": spec["idx"], "data_shape": (3, 24, 24),
            "batch_size": 5, "preprocess_threads": 2}
    return {"epochs": epochs_and_reset(base), "batch": batch_facts(base),
            "imglist": imglist_facts(base, spec["lst"]), "errors": error_facts(base),
            "resume": resume_facts(base), "mean_img": mean_img_facts(base, spec["workdir"])}


def symbol(classes):
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, num_filter=16, kernel=(3, 3), stride=(2, 2), pad=(1, 1))
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.Convolution(net, num_filter=32, kernel=(3, 3), stride=(2, 2), pad=(1, 1))
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.Pooling(net, global_pool=True, pool_type="avg", kernel=(1, 1))
    net = mx.sym.FullyConnected(mx.sym.flatten(net), num_hidden=classes)
    return mx.sym.SoftmaxOutput(net, name="softmax")


def train(spec):
    mx.random.seed(0)
    np.random.seed(0)
    shape = tuple(spec["shape"])
    it = rm.ImageRecordIter(
        path_imgrec=spec["rec"], path_imgidx=spec["idx"], data_shape=shape,
        batch_size=spec["batch_size"], shuffle=True, seed=1, rand_mirror=True,
        random_resized_crop=True, min_random_area=0.5, resize=shape[1] + shape[1] // 8,
        mean_r=123.7, mean_g=116.3, mean_b=103.5, std_r=58.4, std_g=57.1, std_b=57.4,
        preprocess_threads=2)
    losses = []

    def record(epoch, sym, arg, aux):
        losses.append(metric.get()[1])

    metric = mx.metric.CrossEntropy()
    module = mx.mod.Module(symbol(spec["classes"]), context=mx.cpu())
    module.fit(it, num_epoch=spec["epochs"], eval_metric=metric, optimizer="adam",
               optimizer_params={"learning_rate": 0.01},
               initializer=mx.init.Xavier(), epoch_end_callback=record)
    it.close()
    return {"losses": losses, "batches": len(it)}


def seed_aug(spec):
    """Augmented epochs of our iterator for several seed_aug values (modelled on MXNet's
    test_io.py test_image_iter_seed_aug / ImageRecordIter seed_aug checks)."""
    base = dict(spec["base"], data_shape=tuple(spec["base"]["data_shape"]))
    arrays, labels = {}, {}
    for name, extra in (("a1", {"seed_aug": 1}), ("a1_again", {"seed_aug": 1}),
                        ("a2", {"seed_aug": 2}), ("none", {}),
                        ("a1_threads", {"seed_aug": 1, "preprocess_threads": 1})):
        it = rm.ImageRecordIter(**dict(base, **extra))
        data, label, _ = one_epoch(it)
        it.close()
        arrays[name] = data
        labels[name] = label.tolist()
    np.savez(spec["npz"], **arrays)
    return {"labels": labels}


def cifar_mean(spec):
    """A CIFAR-style rec (10 classes of 32x32) with a mean image (MXNet's test_io.py
    test_Cifar10Rec): MXNet creates the mean file, our iterator reads it, with random crop,
    mirror, contrast and illumination; also ours creating its own mean file."""
    base = dict(path_imgrec=spec["rec"], data_shape=(3, 28, 28), batch_size=25, rand_crop=True,
                rand_mirror=True, shuffle=True, preprocess_threads=2)
    theirs_mean = os.path.join(spec["workdir"], "mxnet_mean.bin")
    theirs = mx.io.ImageRecordIter(**dict(base, mean_img=theirs_mean))
    next(theirs)
    del theirs
    facts = {"mxnet_wrote_mean": os.path.exists(theirs_mean)}
    counts, values = {}, []
    for epoch in range(2):
        it = rm.ImageRecordIter(**dict(base, mean_img=theirs_mean, max_random_contrast=0.3,
                                       max_random_illumination=20, seed=epoch))
        data, label, _ = one_epoch(it)
        it.close()
        for value in label.tolist():
            counts[str(int(value))] = counts.get(str(int(value)), 0) + 1
        values.append([float(data.mean()), float(data.std()), bool(np.isfinite(data).all())])
    plain = rm.ImageRecordIter(**dict(base, mean_img=theirs_mean, seed=5))
    jittered = rm.ImageRecordIter(**dict(base, mean_img=theirs_mean, seed=5,
                                         max_random_contrast=0.3, max_random_illumination=20))
    a, b = next(plain).data[0].asnumpy(), next(jittered).data[0].asnumpy()
    plain.close()
    jittered.close()
    ours_mean = os.path.join(spec["workdir"], "ours_mean.bin")
    it = rm.ImageRecordIter(**dict(base, mean_img=ours_mean))
    it.close()
    loaded = mx.nd.load(ours_mean)
    facts.update(counts=counts, values=values, jitter_changes=bool(np.abs(a - b).max() > 1),
                 ours_mean_shape=list(list(loaded.values())[0].shape))
    return facts


COMMANDS = {"parity": parity, "contract": contract, "train": train, "seed_aug": seed_aug,
            "cifar_mean": cifar_mean}


def main(argv):
    command, spec_path, out_path = argv
    with open(spec_path) as f:
        spec = json.load(f)
    result = COMMANDS[command](spec)
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
