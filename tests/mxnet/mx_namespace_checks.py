"""Run by the *mxnet venv's* python for tests/mxnet/test_mx_namespace.py:
``mx_namespace_checks.py REC OUT``: ``recpipe.mx`` beside the real mxnet 1.9.1, facts as JSON."""

import json
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")

import mxnet  # noqa: E402

import recpipe.mx as mx  # noqa: E402


def main(rec, out):
    facts = {}
    kwargs = dict(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=4, resize=20)
    ours = mx.io.ImageRecordIter(preprocess_threads=2, **kwargs)
    theirs = mxnet.io.ImageRecordIter(preprocess_threads=1, **kwargs)
    batch, reference = ours.next(), theirs.next()
    facts["data_is_ndarray"] = isinstance(batch.data[0], mxnet.nd.NDArray)
    facts["label_is_ndarray"] = isinstance(batch.label[0], mxnet.nd.NDArray)
    facts["batch_is_mxnets"] = isinstance(batch, mxnet.io.DataBatch)
    facts["iter_is_mxnets"] = isinstance(ours, mxnet.io.DataIter)
    facts["classes_are_mxnets"] = [mx.io.DataBatch is mxnet.io.DataBatch,
                                   mx.io.DataDesc is mxnet.io.DataDesc,
                                   mx.io.DataIter is mxnet.io.DataIter]
    facts["data_equal"] = bool(np.array_equal(batch.data[0].asnumpy(),
                                              reference.data[0].asnumpy()))
    facts["labels"] = [batch.label[0].asnumpy().tolist(), reference.label[0].asnumpy().tolist()]
    ours.close()
    mine = mx.gluon.data.vision.ImageRecordDataset(rec)
    gluons = mxnet.gluon.data.vision.ImageRecordDataset(rec)
    facts["dataset_lengths"] = [len(mine), len(gluons)]
    same = []
    for i in range(len(gluons)):
        (image, label), (ref_image, ref_label) = mine[i], gluons[i]
        same.append(isinstance(image, mxnet.nd.NDArray)
                    and np.array_equal(image.asnumpy(), ref_image.asnumpy())
                    and float(label) == float(ref_label))
    facts["dataset_items_equal"] = same
    facts["transforms_is_mxnets"] = (mx.gluon.data.vision.transforms
                                     is mxnet.gluon.data.vision.transforms)
    facts["contexts_are_mxnets"] = [mx.cpu() == mxnet.cpu(), mx.gpu(1) == mxnet.gpu(1),
                                    mx.Context is mxnet.Context, mx.nd is mxnet.nd,
                                    mx.kvstore.create("local").rank == 0]
    loader = mx.gluon.data.DataLoader(mine, 4)
    images, labels = next(iter(loader))
    facts["dataloader"] = [loader.__class__.__module__.startswith("mxnet"),
                           isinstance(images, mxnet.nd.NDArray), list(images.shape),
                           labels.asnumpy().tolist()]

    def seeded_labels(**extra):
        it = mx.io.ImageRecordIter(preprocess_threads=1, shuffle=True, rand_mirror=True,
                                   **kwargs, **extra)
        try:
            return [b.label[0].asnumpy().tolist() for b in it]
        finally:
            it.close()

    unseeded = seeded_labels()
    mx.random.seed(11)
    facts["seed_honoured"] = [seeded_labels() == seeded_labels(seed=11),
                              seeded_labels() != unseeded,
                              seeded_labels(seed=0) == unseeded]
    try:
        mx.mod  # noqa: B018
        facts["not_covered"] = None
    except AttributeError as exc:
        facts["not_covered"] = [type(exc).__name__, str(exc)]
    with open(out, "w") as f:
        json.dump(facts, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
