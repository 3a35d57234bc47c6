"""Runner: recpipe's ``ImageLoader`` on the .rec/.idx, its bare decode baseline, and its RSS check.

Modes (run by .venv-peers' python, or any python with recpipe installed):
- default: ``recpipe.ImageLoader`` with ``threads=--threads``; train = random-resized crop 224
  (area 0.08-1, aspect 3/4-4/3) + rand_mirror, val = resize 256 + center crop 224; uint8 NCHW,
  or ``--dtype float32`` normalised with the ImageNet mean/std.
- ``--bare``: the baseline of the 0.9x target: ``--threads`` threads decode every JPEG payload
  of the .rec at full size (``get_decoder().decode(data)`` of ``RecordDecoder.image_bytes``),
  bytes already in memory.
- ``--epochs K``: K full epochs of the loader; the JSON line adds peak/current RSS after each epoch.
"""

import threading
import time

from _common import (IMAGENET_MEAN, IMAGENET_STD, current_rss_mb, emit, measure, parse_args,
                     peak_rss_mb, thread_count, touch)

RECPIPE_DEFAULT_THREADS = 2  # ImageLoader's own default


def extra_arguments(parser):
    parser.add_argument("--bare", action="store_true", help="time bare full-size decode instead")
    parser.add_argument("--epochs", type=int, default=0,
                        help="run K epochs and report RSS per epoch")
    parser.add_argument("--last-batch", default="pad", choices=("pad", "drop"))
    parser.add_argument("--decoder", default="auto")


def loader_kwargs(args, threads):
    spec = args.config_spec
    kwargs = {"threads": threads, "dtype": args.dtype, "layout": "NCHW", "shuffle": False,
              "seed": args.seed, "last_batch": args.last_batch, "decoder": args.decoder}
    if spec["name"] == "train":
        kwargs.update(random_resized_crop=True,
                      min_random_area=spec["area"][0], max_random_area=spec["area"][1],
                      min_aspect_ratio=spec["aspect"][0], max_aspect_ratio=spec["aspect"][1],
                      rand_mirror=True)
    else:
        kwargs.update(resize=spec["resize"])
    if args.dtype == "float32":
        kwargs.update(mean_r=IMAGENET_MEAN[0], mean_g=IMAGENET_MEAN[1], mean_b=IMAGENET_MEAN[2],
                      std_r=IMAGENET_STD[0], std_g=IMAGENET_STD[1], std_b=IMAGENET_STD[2])
    return kwargs


def image_loader_class():
    import recpipe

    if hasattr(recpipe, "ImageLoader"):
        return recpipe.ImageLoader
    from recpipe.decode.loader import ImageLoader

    return ImageLoader


def open_loader(args, threads):
    kwargs = loader_kwargs(args, threads)
    size = args.config_spec["size"]
    loader = image_loader_class()(args.rec, args.batch, (3, size, size), **kwargs)
    return loader, kwargs


def run_loader(args, threads):
    loader, kwargs = open_loader(args, threads)
    state = {"iterator": iter(loader)}

    def fetch():
        try:
            return next(state["iterator"])
        except StopIteration:
            state["iterator"] = iter(loader)
            return next(state["iterator"])

    def consume(batch):
        images, _labels = batch
        return images.shape[0], touch(images)

    with loader:
        used = dict(kwargs, decoder=type(loader.decoder).__name__, batches_per_epoch=len(loader))
        measure(args, fetch, consume, contender="recpipe", used=used, threads_used=loader.threads)


def run_epochs(args, threads):
    """K whole epochs: images/s over all of them and the RSS after each (flat = no leak)."""
    loader, kwargs = open_loader(args, threads)
    rss = []
    images = checksum = 0
    with loader:
        start = time.perf_counter()
        for _ in range(args.epochs):
            for batch, _labels in loader:
                images += batch.shape[0]
                checksum += touch(batch)
            rss.append({"peak_mb": round(peak_rss_mb(), 1),
                        "current_mb": round(current_rss_mb(), 1)})
        seconds = time.perf_counter() - start
        used = dict(kwargs, decoder=type(loader.decoder).__name__, batches_per_epoch=len(loader))
    emit({"contender": "recpipe-epochs", "config": args.config, "dtype": args.dtype,
          "threads": threads, "threads_arg": args.threads, "batch": args.batch,
          "epochs": args.epochs, "images": images, "seconds": round(seconds, 4),
          "images_per_s": round(images / seconds, 2), "rss_by_epoch": rss,
          "peak_rss_mb": rss[-1]["peak_mb"], "checksum": checksum, "used": used})


def load_payload_images(rec):
    """Every record's image bytes (header and labels stripped), in memory."""
    import recpipe
    from recpipe.decode.records import RecordDecoder

    with recpipe.RecordReader(rec) as reader:
        records = RecordDecoder(reader, decoder=None)  # reads and strips headers only
        return [records.image_bytes(position)[1] for position in range(len(reader))]


def run_bare(args, threads):
    """``threads`` free-running threads decode full-size JPEGs; a 'batch' = ``--batch`` more
    decodes done."""
    from recpipe.decode.decoders import get_decoder

    decoder = get_decoder(args.decoder)
    images = load_payload_images(args.rec)
    progress = {"next": 0, "done": 0, "checksum": 0}
    changed = threading.Condition()
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            with changed:
                position = progress["next"]
                progress["next"] += 1
            pixels = decoder.decode(images[position % len(images)])
            probe = int(pixels[pixels.shape[0] // 2, pixels.shape[1] // 2].sum())
            with changed:
                progress["done"] += 1
                progress["checksum"] += probe
                changed.notify_all()

    workers = [threading.Thread(target=worker, name=f"bare-decode-{i}") for i in range(threads)]
    target = {"done": 0}

    def fetch():
        target["done"] += args.batch
        with changed:
            if not changed.wait_for(lambda: progress["done"] >= target["done"], timeout=600):
                raise TimeoutError("bare decode made no progress for 600 s")
            checksum, progress["checksum"] = progress["checksum"], 0
        return checksum

    def consume(checksum):
        return args.batch, checksum

    used = {"decoder": type(decoder).__name__, "full_size": True, "records": len(images),
            "bytes_in_memory": True}
    for thread in workers:
        thread.start()
    try:
        measure(args, fetch, consume, contender="bare-decode", used=used, threads_used=threads)
    finally:
        stop.set()
        for thread in workers:
            thread.join(timeout=60)


def main():
    args = parse_args("time recpipe.ImageLoader (or bare decode)", extra_arguments)
    requested = thread_count(args)
    threads = RECPIPE_DEFAULT_THREADS if requested is None else requested
    if args.bare:
        run_bare(args, threads)
    elif args.epochs:
        run_epochs(args, threads)
    else:
        run_loader(args, threads)


if __name__ == "__main__":
    main()
