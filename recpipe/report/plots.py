"""Charts of ``recpipe bench`` and ``recpipe tune`` results, drawn with matplotlib (the
``plot`` extra, imported only here: ``pip install 'recpipe[plot]'``).

``plot_bench(results, path)``: images/s against decode threads with the ideal linear scaling
from one thread and the bare-decode rate, beside the per-image cost of each stage (read,
decode, augment, batch hand-off) for each configuration, with the part of it that holds the
GIL (Python: serial whatever the cores) drawn over it; stages fused into the native decode
(zero on their own) are named under the bars instead of drawn empty. ``plot_tune(report,
path)``: the autotuner's run against time from its starting setting: threads and prefetch
depth, and each window's throughput and consumer wait drawn against the setting it was
measured at (a decision's rate belongs to the setting before it).
"""

import logging
from typing import Optional

from .._optional import require

__all__ = ["bench_caption", "bench_figure", "plot_bench", "plot_tune"]

log = logging.getLogger(__name__)

_STAGES = ("read", "decode", "augment", "batch")
_COLOURS = {"read": "#4c72b0", "decode": "#dd8452", "augment": "#55a868", "batch": "#8172b3"}


def _pyplot():
    matplotlib = require("matplotlib", "plot")
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    return plt


def bench_caption(results: dict) -> str:
    """What the chart was measured with: threads, usable cores, batch, dtype, decoder, the runs
    per point and the load the runs saw (and the busy-machine warning, when there is one)."""
    machine = results.get("machine") or {}
    parts = [f"{results.get('threads')} threads"]
    if machine.get("cores"):
        parts.append(f"{machine['cores']} usable cores")
    parts += [f"batch {results.get('batch_size')}", str(results.get("dtype")),
              f"decoder {results.get('decoder')}"]
    if results.get("repeats"):
        parts.append(f"median of {results['repeats']} runs of "
                     f"{results.get('seconds_per_run', 0):g} s (bars: slowest-fastest)")
    load = machine.get("load_average")
    parts.append(f"load average {load[0]:.1f}-{load[1]:.1f}" if load else "load not measured")
    caption = ", ".join(parts)
    if machine.get("busy"):
        caption += "\nBUSY MACHINE: other processes took the cores; rates are low and noisy"
    return caption


def bench_figure(results: dict, title: Optional[str] = None):
    """The matplotlib figure of ``plot_bench`` (the caller closes it)."""
    plt = _pyplot()
    configs = results.get("configs") or {}
    fig, (scaling, stages) = plt.subplots(1, 2, figsize=(11, 5.2),
                                          gridspec_kw={"width_ratios": [3, 2]})
    draw_scaling(scaling, results)
    draw_stages(stages, configs)
    fig.suptitle(title or f"recpipe bench: {results.get('file', '')}", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.text(0.01, 0.01, bench_caption(results), fontsize=8, color="0.25", va="bottom")
    return fig


def plot_bench(results: dict, path: str, title: Optional[str] = None) -> str:
    """Write ``recpipe bench``'s ``results`` (with a ``sweep``) as a PNG (or any format
    matplotlib infers from ``path``), captioned with what it was measured with
    (``bench_caption``); returns ``path``."""
    plt = _pyplot()
    fig = bench_figure(results, title)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    log.info("wrote %s", path)
    return path


def draw_scaling(axes, results):
    """images/s against threads, the ideal line from one thread (whole: the y range holds
    it), the bare-decode rate; the legend sits below the axes, over no point."""
    sweep = results.get("sweep") or []
    tops = [results.get("bare_decode_images_per_s") or 0, 1]
    if sweep:
        threads = [p["threads"] for p in sweep]
        rates = [p["images_per_s"] for p in sweep]
        one = rates[threads.index(1)] if 1 in threads else rates[0] / threads[0]
        ideal = [one * t for t in threads]
        axes.plot(threads, rates, "o-", color="#4c72b0", label="pipeline", zorder=3)
        spreads = [p.get("images_per_s_spread") for p in sweep]
        if all(spreads):
            axes.errorbar(threads, rates, yerr=[[r - low for r, (low, _) in zip(rates, spreads)],
                                                [high - r for r, (_, high) in zip(rates, spreads)]],
                          fmt="none", ecolor="#4c72b0", capsize=3, zorder=3)
            tops += [high for _, high in spreads]
        axes.plot(threads, ideal, "--", color="0.55", label="ideal (linear from 1 thread)")
        for t, r in zip(threads, rates):
            axes.annotate(f"{r:.0f}", (t, r), textcoords="offset points", xytext=(0, 7),
                          ha="center", fontsize=8)
        axes.set_xticks(threads)
        axes.set_xlim(min(threads) - 0.3, max(threads) + 0.3)
        tops += rates + ideal
    bare = results.get("bare_decode_images_per_s")
    if bare:
        axes.axhline(bare, color="#c44e52", linestyle=":",
                     label=f"bare decode, {results.get('threads')} threads")
    axes.set_xlabel("decode threads")
    axes.set_ylabel("images / s")
    axes.set_ylim(0, max(tops) * 1.12)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=8,
                frameon=False)
    axes.set_title("thread scaling")


def drawn_stages(configs):
    """``(drawn, left)``: the stages with a visible share of some configuration's cost, and
    the rest with why they are not drawn."""
    names = list(configs)
    totals = [sum(configs[n]["stage_ms_per_image"].values()) for n in names]
    drawn, zero, tiny = [], [], []
    for stage in _STAGES:
        values = [configs[n]["stage_ms_per_image"].get(stage, 0.0) for n in names]
        if not any(values):
            zero.append(stage)
        elif all(v < 0.01 * t for v, t in zip(values, totals)):
            tiny.append(stage)
        else:
            drawn.append(stage)
    left = []
    if zero:
        left.append(f"{', '.join(zero)}: fused into the native decode (timed as decode)")
    if tiny:
        left.append(f"{', '.join(tiny)}: under 1% of the cost, not drawn")
    return drawn, left


def draw_stages(axes, configs):
    """Stacked per-stage cost per configuration with the GIL-held share hatched over it;
    stages that cost nothing on their own (fused into the native decode) are named, not
    drawn as empty bars."""
    names = list(configs)
    drawn, left = drawn_stages(configs)
    bottoms = [0.0] * len(names)
    for stage in drawn:
        values = [configs[n]["stage_ms_per_image"].get(stage, 0.0) for n in names]
        axes.bar(names, values, bottom=bottoms, color=_COLOURS[stage], label=stage, width=0.55)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    gil = [configs[n].get("gil_us_per_image") for n in names]
    if any(g is not None for g in gil):
        axes.bar(names, [(g or 0.0) / 1e3 for g in gil], width=0.25, color="none",
                 edgecolor="black", hatch="///", label="Python (GIL-held)")
        for i, g in enumerate(gil):
            if g is not None:
                axes.annotate(f"{g:.0f} us GIL", (i, bottoms[i]), textcoords="offset points",
                              xytext=(0, 4), ha="center", fontsize=8)
    axes.set_ylabel("thread-ms per image")
    axes.set_title("cost per stage")
    axes.grid(axis="y", alpha=0.3)
    if names:
        axes.set_ylim(0, max(bottoms + [1e-3]) * 1.2)  # room for the GIL labels
        axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if left:
        axes.text(0.0, -0.2, "\n".join(left), transform=axes.transAxes, fontsize=7,
                  va="top", color="0.3")


def tune_timeline(report):
    """``(x, unit, spans)`` of the autotuner's history: ``x`` the time (or window number) at
    which each window closed, and per window the setting it was measured at (the start
    setting, then each earlier decision's) with the rate and wait it measured."""
    history = report.get("history") or []
    timed = history and all(d.get("seconds") is not None for d in history)
    x = [d["seconds"] if timed else d["window"] for d in history]
    # the start setting ran the first window kept, unless the history lost its oldest entries
    whole = report.get("windows", len(history)) <= len(history)
    start = (report.get("start") or {}) if whole else {}
    first = history[0] if history else {}
    setting = (start.get("threads", first.get("threads")),
               start.get("prefetch", first.get("prefetch")))
    spans = []
    for d in history:
        spans.append({"threads": setting[0], "prefetch": setting[1],
                      "images_per_s": d["images_per_s"], "wait_fraction": d["wait_fraction"],
                      "action": d["action"], "changed": d.get("changed", False)})
        setting = (d["threads"], d["prefetch"])
    return x, ("seconds since tuning began" if timed else "tuning window"), spans, setting


def plot_tune(report: dict, path: str, title: Optional[str] = None) -> str:
    """Write the autotuner's ``report`` (``loader.autotune_report()``) as a chart; returns
    ``path``. The setting panel starts from the starting setting; each measured point sits in
    its window and is drawn against the setting it was measured at."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    x, unit, spans, final = tune_timeline(report)
    timed = unit.startswith("seconds")
    fig, (setting, measured) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    begin = 0.0 if timed else (x[0] - 1 if x else 0)
    edges = [begin] + x  # window i runs from edges[i] to edges[i + 1]
    threads = [s["threads"] for s in spans] + [final[0]] if spans else []
    prefetch = [s["prefetch"] for s in spans] + [final[1]] if spans else []
    setting.step(edges, threads, where="post", color="#4c72b0", label="decode threads")
    setting.step(edges, prefetch, where="post", color="#dd8452", label="prefetch (batches)")
    if spans:
        setting.annotate(f"start: {spans[0]['threads']} threads, prefetch {spans[0]['prefetch']}",
                         (edges[0], spans[0]["threads"]), textcoords="offset points",
                         xytext=(2, 6), fontsize=7)
    for edge, span, after in zip(x, spans, threads[1:]):
        if span["changed"]:
            setting.annotate(span["action"], (edge, after), textcoords="offset points",
                             xytext=(0, 6), ha="center", fontsize=7)
    top = max(threads + prefetch + [1])
    setting.set_ylabel("setting")
    setting.set_ylim(0, top * 1.35 + 1)
    setting.yaxis.set_major_locator(MaxNLocator(integer=True))
    setting.grid(alpha=0.3)
    setting.legend(fontsize=8, loc="upper right", ncol=2)
    middles = [(a + b) / 2 for a, b in zip(edges, edges[1:])]
    rates = [s["images_per_s"] for s in spans]
    measured.plot(middles, rates, "o-", color="#55a868", label="images / s (at that window's "
                                                                 "setting)")
    for mid, span, rate in zip(middles, spans, rates):
        measured.annotate(f"{span['threads']}t", (mid, rate), textcoords="offset points",
                          xytext=(0, 7), ha="center", fontsize=7, color="#4c72b0", zorder=5,
                          bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"})
    measured.set_ylabel("images / s")
    measured.set_ylim(0, max(rates + [1]) * 1.3)
    if not timed:
        measured.xaxis.set_major_locator(MaxNLocator(integer=True))
    measured.set_xlabel(unit)
    measured.set_xlim(left=begin)
    measured.grid(alpha=0.3)
    wait = measured.twinx()
    measured.set_zorder(wait.get_zorder() + 1)  # the rate labels over the wait line
    measured.patch.set_visible(False)
    wait.plot(middles, [100 * s["wait_fraction"] for s in spans], "s--", color="#c44e52",
              label="consumer wait %")
    wait.set_ylabel("consumer wait (%)")
    wait.set_ylim(0, 100)
    lines = measured.get_legend_handles_labels()
    extra = wait.get_legend_handles_labels()
    measured.legend(lines[0] + extra[0], lines[1] + extra[1], fontsize=8,
                    loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    fig.suptitle(title or f"recpipe tune: {report.get('reason', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    log.info("wrote %s", path)
    return path
