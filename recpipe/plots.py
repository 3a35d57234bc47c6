"""Charts of ``recpipe bench`` and ``recpipe tune`` results, drawn with matplotlib (the
``plot`` extra, imported only here: ``pip install 'recpipe[plot]'``).

``plot_bench(results, path)``: images/s against decode threads with the ideal linear scaling
from one thread and the bare-decode rate, beside the per-image cost of each stage (read,
decode, augment, batch hand-off) for each configuration, with the part of it that holds the
GIL (Python: serial whatever the cores) drawn over it. ``plot_tune(report, path)``: the
autotuner's decisions window by window: threads and prefetch depth, with the consumer's wait
fraction and the throughput it measured.
"""

import logging
from typing import Optional

from ._optional import require

__all__ = ["plot_bench", "plot_tune"]

log = logging.getLogger(__name__)

_STAGES = ("read", "decode", "augment", "batch")
_COLOURS = {"read": "#4c72b0", "decode": "#dd8452", "augment": "#55a868", "batch": "#8172b3"}


def _pyplot():
    matplotlib = require("matplotlib", "plot")
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


def plot_bench(results: dict, path: str, title: Optional[str] = None) -> str:
    """Write ``recpipe bench``'s ``results`` (with a ``sweep``) as a PNG (or any format
    matplotlib infers from ``path``); returns ``path``."""
    plt = _pyplot()
    sweep = results.get("sweep") or []
    configs = results.get("configs") or {}
    fig, (scaling, stages) = plt.subplots(1, 2, figsize=(11, 4.2),
                                          gridspec_kw={"width_ratios": [3, 2]})
    if sweep:
        threads = [p["threads"] for p in sweep]
        rates = [p["images_per_s"] for p in sweep]
        one = rates[threads.index(1)] if 1 in threads else rates[0] / threads[0]
        scaling.plot(threads, rates, "o-", color="#4c72b0", label="pipeline")
        scaling.plot(threads, [one * t for t in threads], "--", color="0.55",
                     label="ideal (linear from 1 thread)")
        for t, r in zip(threads, rates):
            scaling.annotate(f"{r:.0f}", (t, r), textcoords="offset points", xytext=(0, 7),
                             ha="center", fontsize=8)
        scaling.set_xticks(threads)
    bare = results.get("bare_decode_images_per_s")
    if bare:
        scaling.axhline(bare, color="#c44e52", linestyle=":",
                        label=f"bare decode, {results.get('threads')} threads")
    scaling.set_xlabel("decode threads")
    scaling.set_ylabel("images / s")
    top = max([p["images_per_s"] for p in sweep] + [bare or 0, 1])
    scaling.set_ylim(0, top * 1.2)
    scaling.grid(alpha=0.3)
    scaling.legend(loc="upper left", fontsize=8)
    scaling.set_title("thread scaling")
    names = list(configs)
    bottoms = [0.0] * len(names)
    for stage in _STAGES:
        values = [configs[n]["stage_ms_per_image"].get(stage, 0.0) for n in names]
        stages.bar(names, values, bottom=bottoms, color=_COLOURS[stage], label=stage, width=0.55)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    gil = [configs[n].get("gil_us_per_image") for n in names]
    if any(g is not None for g in gil):
        stages.bar(names, [(g or 0.0) / 1e3 for g in gil], width=0.25, color="none",
                   edgecolor="black", hatch="///", label="Python (GIL-held)")
        for i, g in enumerate(gil):
            if g is not None:
                stages.annotate(f"{g:.0f} us GIL", (i, bottoms[i]), textcoords="offset points",
                                xytext=(0, 4), ha="center", fontsize=8)
    stages.set_ylabel("thread-ms per image")
    stages.set_title("cost per stage")
    stages.grid(axis="y", alpha=0.3)
    if names:
        stages.set_ylim(0, max(bottoms + [1e-3]) * 1.2)  # room for the GIL labels
        stages.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title or f"recpipe bench: {results.get('file', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    log.info("wrote %s", path)
    return path


def plot_tune(report: dict, path: str, title: Optional[str] = None) -> str:
    """Write the autotuner's ``report`` (``loader.autotune_report()``) as a chart; returns
    ``path``."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    history = report.get("history") or []
    windows = [d["window"] for d in history]
    fig, (setting, measured) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    setting.step(windows, [d["threads"] for d in history], where="post", color="#4c72b0",
                 label="decode threads")
    setting.step(windows, [d["prefetch"] for d in history], where="post", color="#dd8452",
                 label="prefetch (batches)")
    for d in history:
        if d.get("changed"):
            setting.annotate(d["action"], (d["window"], d["threads"]), textcoords="offset points",
                             xytext=(0, 6), ha="center", fontsize=7)
    top = max([d["threads"] for d in history] + [d["prefetch"] for d in history] + [1])
    setting.set_ylabel("setting")
    setting.set_ylim(0, top * 1.35 + 1)
    setting.yaxis.set_major_locator(MaxNLocator(integer=True))
    setting.grid(alpha=0.3)
    setting.legend(fontsize=8, loc="upper right", ncol=2)
    rates = [d["images_per_s"] for d in history]
    measured.plot(windows, rates, "o-", color="#55a868", label="images / s")
    measured.set_ylabel("images / s")
    measured.set_ylim(0, max(rates + [1]) * 1.25)
    measured.xaxis.set_major_locator(MaxNLocator(integer=True))
    measured.set_xlabel("tuning window")
    measured.grid(alpha=0.3)
    wait = measured.twinx()
    wait.plot(windows, [100 * d["wait_fraction"] for d in history], "s--", color="#c44e52",
              label="consumer wait %")
    wait.set_ylabel("consumer wait (%)")
    wait.set_ylim(0, 100)
    lines = measured.get_legend_handles_labels()
    extra = wait.get_legend_handles_labels()
    measured.legend(lines[0] + extra[0], lines[1] + extra[1], fontsize=8, loc="lower right",
                    ncol=2)
    fig.suptitle(title or f"recpipe tune: {report.get('reason', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    log.info("wrote %s", path)
    return path
