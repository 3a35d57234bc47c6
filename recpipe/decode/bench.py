"""Throughput measurements behind ``recpipe bench``: bare decode, full pipeline, thread sweep.

All rates are images per second measured in this process; compare them as ratios within one
run (the machines are noisy). ``TRAIN`` and ``VAL`` are the standard ImageNet configurations.
"""

import logging
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..system.host import node_share
from ..io.reader import RecordReader
from .decoders import get_decoder
from .loader import ImageLoader
from .records import RecordDecoder

__all__ = ["TRAIN", "VAL", "FACES", "CONFIGS", "peak_rss_mb", "load_images",
           "bare_decode_rate", "pipeline_rate", "thread_sweep", "measure"]

log = logging.getLogger(__name__)

TRAIN = dict(data_shape=(3, 224, 224), random_resized_crop=True, min_random_area=0.08,
             max_random_area=1.0, min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3, rand_mirror=True)
VAL = dict(data_shape=(3, 224, 224), resize=256)
FACES = dict(data_shape=(3, 112, 112), rand_mirror=True)  # InsightFace's 112x112 crops, flipped
CONFIGS = {"train": TRAIN, "val": VAL, "faces": FACES}


def peak_rss_mb():
    """Peak resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_images(url, limit=None, storage_options=None):
    """The image bytes of the first ``limit`` records, in memory (so decode is timed alone)."""
    with RecordReader(url, storage_options=storage_options) as reader:
        count = len(reader) if limit is None else min(limit, len(reader))
        records = RecordDecoder(reader, decoder=None)  # reads and strips headers only
        return [records.image_bytes(position)[1] for position in range(count)]


def bare_decode_rate(images, threads, *, decoder="auto", seconds=2.0, scale=(1, 1)):
    """Images/s of ``threads`` threads decoding the in-memory ``images`` at full size, nothing else."""
    dec = get_decoder(decoder)
    stop = threading.Event()
    counts = [0] * threads

    def run(worker):
        i = worker
        while not stop.is_set():
            dec.decode(images[i % len(images)], scale=scale)
            counts[worker] += 1
            i += threads

    with ThreadPoolExecutor(threads, thread_name_prefix="recpipe-bench") as pool:
        start = time.perf_counter()
        futures = [pool.submit(run, w) for w in range(threads)]
        time.sleep(seconds)
        stop.set()
        for future in futures:
            future.result()
        elapsed = time.perf_counter() - start
    return sum(counts) / elapsed


def pipeline_rate(url, config, threads, *, batch_size=128, batches=None, seconds=3.0,
                  warmup_batches=1, dtype="uint8", trace=False, **loader_kwargs):
    """Run the loader and return a dict: images_per_s, stage_seconds (per image), wait, rss.

    Runs whole epochs until ``batches`` batches (or ``seconds``) have been timed after a warm-up.
    """
    settings = dict(config)
    settings.update(loader_kwargs)
    data_shape = settings.pop("data_shape")
    with ImageLoader(url, batch_size, data_shape, threads=threads, dtype=dtype, trace=trace,
                     shuffle=True, **settings) as loader:
        stream = _endless(loader)
        for _ in range(warmup_batches):
            next(stream)
        before = loader.stats()
        start = time.perf_counter()
        images = timed = 0
        while not _finished(timed, batches, start, seconds):
            images += len(next(stream)[0])
            timed += 1
        elapsed = time.perf_counter() - start
        stream.close()
        after = loader.stats()
        spans = loader.trace_spans if trace else None
    samples = max(1, after["samples"] - before["samples"])
    stage = {k: (after["stage_seconds"][k] - before["stage_seconds"][k]) / samples
             for k in after["stage_seconds"]}
    gil_us = (after["gil_seconds"] - before["gil_seconds"]) / samples * 1e6
    return {
        "threads": threads,
        "images_per_s": images / elapsed,
        "stage_ms_per_image": {k: v * 1e3 for k, v in stage.items()},
        # worker CPU outside GIL-releasing C calls: serial, whatever the core count
        "gil_us_per_image": gil_us,
        "gil_ceiling_images_per_s": 1e6 / gil_us if gil_us > 0 else None,
        "wait_fraction": (after["wait_seconds"] - before["wait_seconds"]) / elapsed,
        "peak_rss_mb": peak_rss_mb(),
        "trace": spans,
    }


def _endless(loader):
    while True:
        yield from loader


def _finished(timed, batches, start, seconds):
    if batches:
        return timed >= batches
    return timed > 0 and time.perf_counter() - start >= seconds


def thread_sweep(url, config, thread_counts, **kwargs):
    """``pipeline_rate`` for each thread count, in order."""
    return [pipeline_rate(url, config, n, **kwargs) for n in thread_counts]


def measure(url, configs, *, threads=None, batch_size=128, seconds=3.0, dtype="uint8",
            decoder="auto", trace_path=None, say=None, storage_options=None):
    """Bare decode rate, then each named configuration's pipeline rate: the results dict of
    ``recpipe bench``. ``trace_path`` writes a Chrome trace of the first configuration."""
    from .stats import write_chrome_trace

    unknown = [name for name in configs if name not in CONFIGS]
    if unknown:
        raise ValueError(f"unknown configuration(s) {unknown}: choose from {sorted(CONFIGS)}")
    say = say or log.info
    threads = threads or node_share()[0]
    results = {"file": url, "threads": threads, "decoder": decoder, "batch_size": batch_size,
               "dtype": dtype, "configs": {}}
    say(f"bare decode ({threads} threads)...")
    bare = bare_decode_rate(load_images(url, limit=512, storage_options=storage_options), threads,
                            decoder=decoder, seconds=seconds)
    results["bare_decode_images_per_s"] = bare
    for i, name in enumerate(configs):
        say(f"pipeline, {name} configuration...")
        result = pipeline_rate(url, CONFIGS[name], threads, batch_size=batch_size,
                               seconds=seconds, dtype=dtype, decoder=decoder,
                               trace=bool(trace_path) and i == 0,
                               storage_options=storage_options)
        spans = result.pop("trace")
        if spans:
            write_chrome_trace(spans, trace_path)
        result["vs_bare_decode"] = result["images_per_s"] / bare
        results["configs"][name] = result
    return results
