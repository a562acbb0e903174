"""Chapter 07's figures: every measure against the pretraining negation rate."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..methods.registry import method_label

# the order of chapter 07's panels; all but the LCD and beta measures are shown in %
ORDER = ("MCQ", "MCQ positive", "MCQ negative", "MCQ hybrid", "polarity AUC", "detection AUC", "LCD peak",
         "LCD final", "LCD peak - final", "median beta_c-", "Conf-2C", "FACTOR", "FACTOR NOT", "FACTOR AND",
         "FACTOR OR", "FACTOR BUT-NOT", "FACTOR NEITHER", "retrieval R@5")
FRACTIONS = ("LCD peak", "LCD final", "LCD peak - final", "median beta_c-")


def _rate_axis(ax, rates):
    ax.set_xscale("symlog", linthresh=0.005)
    ax.set_xticks(rates, [f"{100 * r:g}%" for r in rates])
    ax.set_xlabel("negated captions in pretraining")


def plot_measures(measures: pd.DataFrame, untrained: dict, columns=None, ncols: int = 4):
    """One panel per measure against the rate; the dashed line is the untrained organism."""
    columns = columns or [c for c in ORDER if c in measures.columns]
    nrows = int(np.ceil(len(columns) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.6 * nrows), squeeze=False)
    rates = measures["rate"].to_numpy()
    for ax, col in zip(axes.ravel(), columns):
        scale = 1 if col in FRACTIONS else 100
        ax.plot(rates, scale * measures[col], "o-")
        if col in untrained and pd.notna(untrained[col]):
            ax.axhline(scale * untrained[col], color="grey", ls="--", lw=1)
        ax.set_title(col)
        ax.set_ylabel("%" if scale == 100 else "value")
        _rate_axis(ax, rates)
    for ax in axes.ravel()[len(columns):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def plot_lcd_by_rate(curves: pd.DataFrame):
    """D_LCD (negated pairs) and alignment A per layer, one line per rate."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for rate, block in curves.groupby("rate"):
        d = block[(block["condition"] == "negated") & (block["quantity"] == "D_LCD")]
        a = block[block["quantity"] == "A"]
        left.plot(d["layer"], d["mean"], "o-", label=f"{100 * rate:g}%")
        right.plot(a["layer"], a["mean"], "o-", label=f"{100 * rate:g}%")
    left.set_title("compositional divergence D_LCD")
    right.set_title("visual alignment A")
    for ax in (left, right):
        ax.set_xlabel("text layer")
        ax.set_ylabel("mean over diagnostic pairs")
    left.legend(title="negation rate")
    fig.tight_layout()
    return fig


def plot_gains(methods: pd.DataFrame, measures: pd.DataFrame):
    """Left: each method's MCQ gain over vanilla against the rate. Right: PeakPatch's gain
    against the LCD peak height of the frozen model it corrects."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    rates = sorted(methods["rate"].unique())
    for method, block in methods[methods["method"] != method_label("vanilla")].groupby("method"):
        left.plot(block["rate"], 100 * block["MCQ gain"], "o-", label=method)
    left.axhline(0, color="grey", lw=1)
    _rate_axis(left, rates)
    left.set_ylabel("MCQ gain over vanilla (points)")
    left.legend()
    peak = measures.set_index("rate")["LCD peak"]
    pp = methods[methods["method"] == method_label("peakpatch_joint")].set_index("rate")["MCQ gain"]
    right.plot(peak.reindex(pp.index), 100 * pp, "o")
    for rate, gain in pp.items():
        right.annotate(f"{100 * rate:g}%", (peak[rate], 100 * gain), textcoords="offset points", xytext=(4, 4))
    right.set_xlabel("LCD peak of the frozen model")
    right.set_ylabel("PeakPatch MCQ gain (points)")
    fig.tight_layout()
    return fig
