"""Peer runner: MXNet 1.9.1 ``mx.io.ImageRecordIter`` on the .rec/.idx (run by .venv-mxnet's
python).

``--threads default`` leaves ``preprocess_threads`` at MXNet's default (4) with ``ctx='gpu'``
(the default), which MXNet caps at ``max(nprocs/2, 1)``; ``--threads N`` passes
``preprocess_threads=N`` (same cap).
"""

import os

from _common import IMAGENET_MEAN, IMAGENET_STD, measure, parse_args, thread_count

MXNET_DEFAULT_PREPROCESS_THREADS = 4


def effective_threads(requested):
    """MXNet's OpenMP decode threads for ``ctx='gpu'``:
    min(preprocess_threads, max(nprocs/2, 1))."""
    asked = MXNET_DEFAULT_PREPROCESS_THREADS if requested is None else requested
    return min(asked, max((os.cpu_count() or 1) // 2, 1))


def iterator_kwargs(args, requested_threads):
    spec = args.config_spec
    size = spec["size"]
    kwargs = {
        "path_imgrec": args.rec,
        "path_imgidx": os.path.splitext(args.rec)[0] + ".idx",
        "data_shape": (3, size, size),
        "batch_size": args.batch,
        "shuffle": False,
        "round_batch": True,
        "verbose": False,
        "dtype": args.dtype,
    }
    if requested_threads is not None:
        kwargs["preprocess_threads"] = requested_threads
    if spec["name"] == "train":
        kwargs.update(
            random_resized_crop=True,
            min_random_area=spec["area"][0], max_random_area=spec["area"][1],
            min_aspect_ratio=spec["aspect"][0], max_aspect_ratio=spec["aspect"][1],
            rand_mirror=True,
        )
    else:
        kwargs.update(resize=spec["resize"])  # final center crop to data_shape is the default
    if args.dtype == "float32":
        kwargs.update(mean_r=IMAGENET_MEAN[0], mean_g=IMAGENET_MEAN[1], mean_b=IMAGENET_MEAN[2],
                      std_r=IMAGENET_STD[0], std_g=IMAGENET_STD[1], std_b=IMAGENET_STD[2])
    return kwargs


def main():
    args = parse_args("time mx.io.ImageRecordIter")
    import mxnet as mx

    requested = thread_count(args)
    kwargs = iterator_kwargs(args, requested)
    data_iter = mx.io.ImageRecordIter(**kwargs)

    def fetch():
        try:
            return data_iter.next()
        except StopIteration:
            data_iter.reset()
            return data_iter.next()

    def consume(batch):
        data = batch.data[0]
        probe = data[:, :, data.shape[2] // 2, data.shape[3] // 2].asnumpy()  # waits for the batch
        return data.shape[0], int(probe.astype("int64").sum())

    used = {key: (list(value) if isinstance(value, tuple) else value)
            for key, value in kwargs.items() if not key.startswith("path_")}
    used.update(ctx="gpu (default)", output_dtype=str(data_iter.provide_data[0].dtype),
                mxnet=mx.__version__)
    measure(args, fetch, consume, contender="mxnet", used=used,
            threads_used=effective_threads(requested))


if __name__ == "__main__":
    main()
