"""The book's summary figures: the unified method x benchmark table as intervals (chapter 06) and
the performance appendix's ratios and notebook times."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..methods.registry import method_label


def plot_unified(long: pd.DataFrame, reference: str = method_label("vanilla"), ncols: int = 5):
    """One panel per benchmark: each method's value with its 95% bootstrap interval, the
    reference method's value dashed. ``long`` is ``report.unified.unified_table``'s frame."""
    benchmarks = list(dict.fromkeys(long["benchmark"]))
    methods = list(dict.fromkeys(long["method"]))
    nrows = int(np.ceil(len(benchmarks) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 0.28 * len(methods) * nrows + 1.2 * nrows),
                             sharey=True, squeeze=False)
    y = {m: i for i, m in enumerate(methods)}
    for ax, bench in zip(axes.ravel(), benchmarks):
        block = long[long["benchmark"] == bench]
        ys = block["method"].map(y)
        ax.errorbar(block["value"], ys, xerr=[block["value"] - block["low"], block["high"] - block["value"]],
                    fmt="o", ms=4, capsize=2, color="tab:blue")
        ref = block[block["method"] == reference]
        if len(ref):
            ax.axvline(ref["value"].iloc[0], color="grey", ls="--", lw=1)
        ax.set_title(bench)
        ax.set_xlabel("rho" if bench == "rho" else "%")
        ax.grid(axis="x", alpha=0.3)
    for ax in axes.ravel()[len(benchmarks):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_yticks(range(len(methods)), methods)
        row[0].set_ylabel("method")
    axes[0][0].invert_yaxis()
    fig.tight_layout()
    return fig


def plot_ratios(ratios: pd.DataFrame):
    """Horizontal bars of measured ratios (log scale): ``ratios`` has columns measure, ratio."""
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(ratios) + 1))
    ax.barh(ratios["measure"], ratios["ratio"], color="tab:blue")
    ax.axvline(1, color="grey", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("ratio (log scale; 1 = no difference)")
    ax.set_ylabel("measure")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


def plot_notebook_times(times: pd.DataFrame):
    """Wall seconds per notebook, one bar group per profile."""
    table = times.pivot_table(index="notebook", columns="profile", values="seconds")
    ax = table.plot.barh(figsize=(7, 0.45 * len(table) + 1))
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("notebook")
    ax.invert_yaxis()
    ax.figure.tight_layout()
    return ax.figure


def plot_absent(reason: str):
    """The figure a chapter shows where its data has nothing to draw (a loaded checkpoint has no
    pretraining curve; real captions record no grammatical structure): the reason, in the figure's
    place, so its caption and every reference to it stay."""
    fig, ax = plt.subplots(figsize=(6, 1.2))
    ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    return fig
