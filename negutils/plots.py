"""Figures for the chapters: labelled axes, one function per figure."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.patches import Rectangle

from .coco import CocoSplit


def show_samples(split: CocoSplit, n: int = 8, seed: int = 0, columns: int = 4):
    """A grid of images with their ground-truth boxes and first caption."""
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(split), size=min(n, len(split)), replace=False))
    rows = int(np.ceil(len(idx) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 3.6 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, i in zip(axes.flat, idx):
        ax.imshow(np.asarray(split.load_image(int(i))))
        for name, (x, y, w, h) in (split.boxes[i] if split.boxes else []):
            ax.add_patch(Rectangle((x, y), w, h, fill=False, lw=1.2, ec="white"))
            ax.text(x, y - 1, name, color="white", fontsize=7, va="bottom",
                    bbox={"fc": "black", "alpha": 0.5, "pad": 0.5, "lw": 0})
        caption = split.captions[i][0]["caption"] if split.captions[i] else ""
        ax.set_title("\n".join(textwrap.wrap(caption, 30)), fontsize=8)
    fig.tight_layout()
    return fig


def plot_pretraining(history: pd.DataFrame, evaluations: pd.DataFrame):
    """Contrastive loss per step beside held-out retrieval recall at the evaluation points."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    a.plot(history["samples"], history["loss"], lw=0.8, alpha=0.5, label="per step")
    a.plot(history["samples"], history["loss"].rolling(10, min_periods=1).mean(), lw=2, label="10-step mean")
    a.set_xlabel("training samples seen")
    a.set_ylabel("CLIP contrastive loss")
    a.legend()
    if len(evaluations):
        for col in ("t2i_R@1", "t2i_R@5", "i2t_R@5"):
            b.plot(evaluations["samples"], 100 * evaluations[col], marker="o", label=col)
        b.axhline(100 * evaluations["chance_R@5"].iloc[0], ls="--", c="gray", label="chance R@5")
        b.set_xlabel("training samples seen")
        b.set_ylabel(f"recall on {int(evaluations['gallery'].iloc[0])} val images (%)")
        b.legend()
    fig.tight_layout()
    return fig


def plot_negation_cosines(cosines: pd.DataFrame):
    """Histogram of cos(a X, no X) against cos(a X, a Y)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    sns.histplot(data=cosines, x="cosine", hue="pair", stat="density", common_norm=False, bins=30, ax=ax)
    ax.set_xlabel("cosine similarity of text embeddings")
    ax.set_ylabel("density")
    fig.tight_layout()
    return fig


def plot_recognition(per_category: dict[str, pd.DataFrame]):
    """Per-category detection AUC, one bar group per model, with the chance line at 0.5."""
    frame = pd.concat([t.assign(model=label) for label, t in per_category.items()])
    fig, ax = plt.subplots(figsize=(11, 3.8))
    sns.barplot(data=frame, x="category", y="detection AUC", hue="model", ax=ax)
    ax.axhline(0.5, ls="--", c="gray", lw=1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("category")
    ax.set_ylabel("detection AUC")
    ax.tick_params(axis="x", rotation=60)
    fig.tight_layout()
    return fig
