"""Peer runner: NVIDIA DALI's CPU-only pipeline on the same .rec/.idx (run by .venv-peers' python).

Built with ``device_id=None`` (no GPU touched) and ``num_threads=--threads``. Train:
``fn.readers.mxnet`` -> ``fn.decoders.image_random_crop`` (ROI decode) -> ``fn.resize(224x224)`` ->
``fn.crop_mirror_normalize(mirror=coin_flip, CHW)``. Val: ``fn.decoders.image`` ->
``fn.resize(shorter=256)`` -> ``fn.crop_mirror_normalize(crop 224, CHW)``. uint8 output unless
``--dtype float32`` (mean/std normalised).
"""

import os

from _common import IMAGENET_MEAN, IMAGENET_STD, measure, parse_args, thread_count


def build_pipeline(args, threads):
    from nvidia.dali import fn, pipeline_def, types

    spec = args.config_spec
    size = spec["size"]
    rec = args.rec
    idx = os.path.splitext(rec)[0] + ".idx"

    @pipeline_def(batch_size=args.batch, num_threads=threads, device_id=None, seed=args.seed + 1)
    def pipeline():
        jpegs, labels = fn.readers.mxnet(path=[rec], index_path=[idx], random_shuffle=False,
                                         name="reader")
        if spec["name"] == "train":
            images = fn.decoders.image_random_crop(
                jpegs, device="cpu", output_type=types.RGB,
                random_area=list(spec["area"]), random_aspect_ratio=list(spec["aspect"]),
                num_attempts=10)
            images = fn.resize(images, resize_x=size, resize_y=size)
            mirror = fn.random.coin_flip(probability=0.5)
        else:
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=spec["resize"])
            mirror = 0
        if args.dtype == "float32":
            normalise = {"dtype": types.FLOAT, "mean": list(IMAGENET_MEAN),
                         "std": list(IMAGENET_STD)}
        else:
            normalise = {"dtype": types.UINT8}
        images = fn.crop_mirror_normalize(images, crop=(size, size), mirror=mirror,
                                          output_layout="CHW", **normalise)
        return images, labels

    pipe = pipeline()
    pipe.build()
    return pipe


def main():
    args = parse_args("time NVIDIA DALI's CPU pipeline")
    import nvidia.dali as dali

    requested = thread_count(args)
    threads = os.cpu_count() if requested is None else requested
    pipe = build_pipeline(args, threads)

    def fetch():
        images, _labels = pipe.run()
        return images

    def consume(images):
        array = images.as_array()
        probe = array[:, :, array.shape[2] // 2, array.shape[3] // 2]
        return array.shape[0], int(probe.astype("int64").sum())

    spec = args.config_spec
    crop = f"decoders.image_random_crop(area={spec.get('area')}, aspect={spec.get('aspect')})"
    ops = (["readers.mxnet", crop, "resize(224x224)",
            "crop_mirror_normalize(mirror=coin_flip, CHW)"]
           if spec["name"] == "train" else
           ["readers.mxnet", "decoders.image", "resize(shorter=256)",
            "crop_mirror_normalize(crop=224, CHW)"])
    used = {"num_threads": threads, "device_id": None, "ops": ops, "output_dtype": args.dtype,
            "dali": dali.__version__}
    measure(args, fetch, consume, contender="dali", used=used, threads_used=threads)


if __name__ == "__main__":
    main()
