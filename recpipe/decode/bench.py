"""Throughput measurements behind ``recpipe bench``: bare decode, full pipeline, thread sweep.

All rates are images per second measured in this process; compare them as ratios within one
run (the machines are noisy). ``TRAIN`` and ``VAL`` are the standard ImageNet configurations.

Every timed run also records the CPU it got (``cpu_meter``: process CPU time against wall
time, its threads' wait for a CPU, the load), so a rate can be read against the cores it had,
and CPU ms per image, which the load does not change. ``measure`` repeats every run
(``repeats``), interleaved in rotating order (bare decode, each configuration, each sweep
point), so that each figure is a median with its spread and every figure saw the same machine;
the sweep's point at the table's thread count is the table's own runs, not a second
measurement: one configuration, one figure.
"""

import logging
import resource
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..system.host import node_share
from ..io.format.layout import image_positions
from ..io.reader import RecordReader
from .cpu_meter import CpuMeter, CpuShare
from .decoders import get_decoder
from .loader import ImageLoader
from .records import RecordDecoder
from .timing import machine_record, median_spread, rotated

__all__ = ["TRAIN", "VAL", "FACES", "CONFIGS", "peak_rss_mb", "load_images", "bare_decode",
           "bare_decode_rate", "pipeline_rate", "thread_sweep", "measure", "summarize"]

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
    """The image bytes of the first ``limit`` records the loader serves, in memory (so decode
    is timed alone): in a file in InsightFace's layout its images, not the header and identity
    records, which hold none (``io.format.layout.image_positions``, as the loader)."""
    with RecordReader(url, storage_options=storage_options, note_unprotected=True) as reader:
        positions = image_positions(reader)
        if positions is None:
            positions = range(len(reader))
        if limit is not None:
            positions = positions[:limit]
        records = RecordDecoder(reader, decoder=None)  # reads and strips headers only
        return [records.image_bytes(int(position))[1] for position in positions]


def bare_decode(images, threads, *, decoder="auto", seconds=2.0, scale=(1, 1), cores=None):
    """``threads`` threads decoding the in-memory ``images`` at full size, nothing else: a dict
    of ``images_per_s``, ``cpu_ms_per_image`` and ``cpu`` (the ``CpuShare`` it got)."""
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
        meter = CpuMeter(cores or node_share()[0])
        start = time.perf_counter()
        futures = [pool.submit(run, w) for w in range(threads)]
        time.sleep(seconds)
        stop.set()
        for future in futures:
            future.result()
        elapsed = time.perf_counter() - start
        share = meter.read()
    done = max(1, sum(counts))
    return {"threads": threads, "images_per_s": sum(counts) / elapsed,
            "cpu_ms_per_image": share.cpu_seconds / done * 1e3, "cpu": share.to_dict()}


def bare_decode_rate(images, threads, *, decoder="auto", seconds=2.0, scale=(1, 1)):
    """Images/s of ``threads`` threads decoding the in-memory ``images`` at full size, nothing
    else."""
    return bare_decode(images, threads, decoder=decoder, seconds=seconds,
                       scale=scale)["images_per_s"]


def pipeline_rate(url, config, threads, *, batch_size=128, batches=None, seconds=3.0,
                  warmup_batches=1, dtype="uint8", trace=False, cores=None, **loader_kwargs):
    """Run the loader and return a dict: images_per_s, stage_seconds (per image), wait, rss,
    the CPU the timed part got (``cpu``) and CPU ms per image.

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
        meter = CpuMeter(cores or node_share()[0])
        start = time.perf_counter()
        images = timed = 0
        while not _finished(timed, batches, start, seconds):
            images += len(next(stream)[0])
            timed += 1
        elapsed = time.perf_counter() - start
        share = meter.read()
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
        "cpu_ms_per_image": share.cpu_seconds / max(1, images) * 1e3,
        "cpu": share.to_dict(),
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


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(runs):
    """One figure from repeated runs of the same measurement: medians (rates, stage costs,
    GIL, wait, CPU), every run's rate, and the spread ``[min, max]`` of the rates."""
    rates = median_spread(r["images_per_s"] for r in runs)
    summary = {"threads": runs[0]["threads"], "runs": len(runs),
               "images_per_s": rates["median"], "images_per_s_runs": rates["runs"],
               "images_per_s_spread": rates["spread"],
               "cpu_ms_per_image": _median(r["cpu_ms_per_image"] for r in runs),
               "cores_used": _median(r["cpu"]["cores_used"] for r in runs),
               "run_queue_share": max((r["cpu"]["run_queue_share"] for r in runs
                                       if r["cpu"]["run_queue_share"] is not None),
                                      default=None)}
    if "stage_ms_per_image" in runs[0]:
        summary["stage_ms_per_image"] = {
            k: statistics.median(r["stage_ms_per_image"][k] for r in runs)
            for k in runs[0]["stage_ms_per_image"]}
        summary["gil_us_per_image"] = statistics.median(r["gil_us_per_image"] for r in runs)
        gil = summary["gil_us_per_image"]
        summary["gil_ceiling_images_per_s"] = 1e6 / gil if gil > 0 else None
        summary["wait_fraction"] = statistics.median(r["wait_fraction"] for r in runs)
    return summary


def measure(url, configs, *, threads=None, batch_size=128, seconds=1.0, dtype="uint8",
            decoder="auto", trace_path=None, say=None, storage_options=None, repeats=3,
            sweep=()):
    """Bare decode, each named configuration's pipeline and, for the first configuration, the
    thread counts of ``sweep``: the results dict of ``recpipe bench``. Each is run ``repeats``
    times of ``seconds``, all interleaved in rotating order, and reported as the median with
    its spread and the CPU it got (``summarize``); ``machine`` says the cores, the load seen
    and, when other processes took the cores, ``busy``: why the rates are low and noisy.
    ``trace_path`` writes a Chrome trace of the first configuration's first run."""
    from .stats import write_chrome_trace

    unknown = [name for name in configs if name not in CONFIGS]
    if unknown:
        raise ValueError(f"unknown configuration(s) {unknown}: choose from {sorted(CONFIGS)}")
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be at least 1")
    say = say or log.info
    cores, cores_source = node_share()
    threads = threads or cores
    first = configs[0] if configs else None
    # (config, threads) -> runs; the sweep's point at `threads` is the table's entry itself
    jobs = [("bare", threads)] + [(name, threads) for name in configs]
    jobs += [(first, n) for n in sweep if first is not None and n != threads]
    runs = {job: [] for job in jobs}
    images = load_images(url, limit=512, storage_options=storage_options)
    traced = not trace_path
    say(f"{len(jobs)} measurements x {repeats} runs of {seconds:g} s, interleaved "
        f"({threads} threads, {cores} usable cores)...")
    for round_ in range(repeats):
        for job in rotated(jobs, round_):
            name, n = job
            if name == "bare":
                runs[job].append(bare_decode(images, n, decoder=decoder, seconds=seconds,
                                             cores=cores))
                continue
            trace = not traced and name == first and n == threads
            result = pipeline_rate(url, CONFIGS[name], n, batch_size=batch_size,
                                   seconds=seconds, dtype=dtype, decoder=decoder, trace=trace,
                                   cores=cores, storage_options=storage_options)
            spans = result.pop("trace")
            if trace and spans:
                write_chrome_trace(spans, trace_path)
                traced = True
            runs[job].append(result)
    bare = summarize(runs[("bare", threads)])
    results = {"file": url, "threads": threads, "decoder": decoder, "batch_size": batch_size,
               "dtype": dtype, "repeats": repeats, "seconds_per_run": seconds,
               "bare_decode_images_per_s": bare["images_per_s"], "bare_decode": bare,
               "configs": {}}
    for name in configs:
        summary = summarize(runs[(name, threads)])
        summary["vs_bare_decode"] = summary["images_per_s"] / bare["images_per_s"]
        results["configs"][name] = summary
    if sweep and first is not None:
        results["sweep_config"] = first
        results["sweep"] = [results["configs"][first] if n == threads
                            else summarize(runs[(first, n)]) for n in sweep]
    shares = [CpuShare.from_dict(r["cpu"]) for job_runs in runs.values() for r in job_runs]
    results["machine"] = machine_record(shares, threads, cores, cores_source)
    return results
