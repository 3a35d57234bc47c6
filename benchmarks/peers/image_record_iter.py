"""Runner: ``mx.io.ImageRecordIter`` or its drop-in ``recpipe.mxnet.ImageRecordIter`` on the same
.rec, as users of MXNet's example scripts configure it (run by .venv-mxnet's python, with
recpipe importable: PYTHONPATH or an install).

``--module mxnet|recpipe``; train = shuffle, random-resized crop 224, mirror, colour jitter 0.4,
ImageNet normalisation; val = resize 256 + centre crop 224, normalised. Builds the iterator,
takes one warm-up batch, times ``--batches`` batches (``wait_to_read`` on every NDArray) and
prints one JSON line: ``{"images_per_s": ..., "module": ..., "threads": ...}``.
"""

import argparse
import json
import os
import sys
import time
import warnings

NORMALIZE = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12,
                 std_b=57.375)
CONFIGS = {
    # ImageNet-style training: random-resized crop, flip, colour jitter, full shuffle
    "train": dict(shuffle=True, random_resized_crop=True, min_random_area=0.08,
                  max_aspect_ratio=4 / 3, min_aspect_ratio=3 / 4, rand_mirror=True,
                  brightness=0.4, contrast=0.4, saturation=0.4, **NORMALIZE),
    # validation: shorter side to 256, center crop 224
    "val": dict(resize=256, **NORMALIZE),
}


def time_iterator(make, batches):
    it = make()
    try:
        first = next(it)
        first.data[0].wait_to_read()
        started = time.perf_counter()
        images = 0
        for _ in range(batches):
            try:
                batch = next(it)
            except StopIteration:
                it.reset()
                batch = next(it)
            batch.data[0].wait_to_read()
            images += batch.data[0].shape[0] - batch.pad
        return images / (time.perf_counter() - started)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
        del it


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", choices=("mxnet", "recpipe"), required=True)
    parser.add_argument("--rec", required=True)
    parser.add_argument("--config", choices=list(CONFIGS), default="train")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=8)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.module == "mxnet":
        import mxnet as mx

        iterator = mx.io.ImageRecordIter
    else:
        import recpipe.mxnet as rm

        iterator = rm.ImageRecordIter
    kwargs = dict(path_imgrec=args.rec, path_imgidx=os.path.splitext(args.rec)[0] + ".idx",
                  data_shape=(3, 224, 224), batch_size=args.batch_size,
                  preprocess_threads=args.threads, **CONFIGS[args.config])
    rate = time_iterator(lambda: iterator(**kwargs), args.batches)
    sys.stdout.write(json.dumps({"images_per_s": rate, "module": args.module,
                                 "threads": args.threads, "config": args.config}) + "\n")


if __name__ == "__main__":
    main()
