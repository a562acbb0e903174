"""Figures for the chapters: labelled axes, one function per figure."""
from __future__ import annotations

import json
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.patches import Rectangle

from ..world.coco import CocoSplit


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
    frame = pd.concat([t.assign(model=label) for label, t in per_category.items()], ignore_index=True)
    fig, ax = plt.subplots(figsize=(11, 3.8))
    sns.barplot(data=frame, x="category", y="detection AUC", hue="model", ax=ax)
    ax.axhline(0.5, ls="--", c="gray", lw=1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("category")
    ax.set_ylabel("detection AUC")
    ax.tick_params(axis="x", rotation=60)
    fig.tight_layout()
    return fig


def _image_axis(ax, split: CocoSplit, image_id: int, title: str = "", colour: str | None = None):
    index = split.image_ids.index(image_id)
    ax.imshow(np.asarray(split.load_image(index)))
    ax.set_xticks([])
    ax.set_yticks([])
    if colour:
        for spine in ax.spines.values():
            spine.set_edgecolor(colour)
            spine.set_linewidth(3)
    if title:
        ax.set_title(title, fontsize=8)


def show_mcq_examples(mcq: pd.DataFrame, split: CocoSplit, n: int = 3, seed: int = 0):
    """One question per correct template: the image, then its four options (correct in green)."""
    rng = np.random.default_rng(seed)
    picks = [g.iloc[int(rng.integers(len(g)))] for _, g in mcq.groupby("correct_answer_template")][:n]
    fig, axes = plt.subplots(len(picks), 2, figsize=(10, 2.4 * len(picks)), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 3]})
    for (img_ax, text_ax), row in zip(axes, picks):
        _image_axis(img_ax, split, int(row["image_id"]), f"template: {row['correct_answer_template']}")
        text_ax.axis("off")
        for k in range(4):
            right = k == row["correct_answer"]
            kind = "correct" if right else f"wrong ({row.get(f'caption_{k}_type', '?')})"
            text_ax.text(0, 0.85 - 0.25 * k, f"{k}. {row[f'caption_{k}']}   [{kind}]", fontsize=9,
                         color="green" if right else "black", transform=text_ax.transAxes)
    fig.tight_layout()
    return fig


def show_confusion_gallery(gallery, split: CocoSplit, per_row: int = 5):
    """A COCO-Confusion gallery: correct images (green, top) and confusing ones (red, bottom)."""

    correct, confusing = json.loads(gallery["correct_ids"])[:per_row], json.loads(gallery["confusing_ids"])[:per_row]
    fig, axes = plt.subplots(2, per_row, figsize=(2 * per_row, 4.4), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, i in zip(axes[0], correct):
        ax.axis("on")
        _image_axis(ax, split, i, "correct", "green")
    for ax, i in zip(axes[1], confusing):
        ax.axis("on")
        _image_axis(ax, split, i, f"confusing: has {gallery['negative']}", "red")
    fig.suptitle(f"query: {gallery['query']}", fontsize=10)
    fig.tight_layout()
    return fig


def show_factor_examples(factor: pd.DataFrame, split: CocoSplit, seed: int = 0):
    """One FACTOR-Bench sample per operator-split test: the image and its two captions."""
    rng = np.random.default_rng(seed)
    ops = factor[factor["split"] == "operator"]
    picks = [g.iloc[int(rng.integers(len(g)))] for _, g in ops.groupby("test")]
    fig, axes = plt.subplots(1, len(picks), figsize=(2.8 * len(picks), 3.6), squeeze=False)
    for ax, row in zip(axes[0], picks):
        right, wrong = row[f"caption_{row['correct']}"], row[f"caption_{1 - row['correct']}"]
        _image_axis(ax, split, int(row["image_id"]))
        ax.set_title(row["test"], fontsize=10)
        ax.set_xlabel("\n".join(textwrap.wrap(f"true: {right}", 30) + textwrap.wrap(f"false: {wrong}", 30)),
                      fontsize=8)
    fig.tight_layout()
    return fig


def plot_mcq_breakdown(results: pd.DataFrame):
    """MCQ accuracy per correct template for each model, with the 25% line."""
    cols = ["positive_accuracy", "negative_accuracy", "hybrid_accuracy", "accuracy"]
    frame = results.melt(id_vars=["pretrained", "dataset", "split"], value_vars=cols, var_name="template",
                         value_name="acc")
    frame["template"] = frame["template"].str.replace("_accuracy", "").str.replace("accuracy", "overall")
    frame["acc"] *= 100
    frame["model"] = frame["pretrained"] + " / " + frame["dataset"] + "/" + frame["split"]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    sns.barplot(data=frame, x="template", y="acc", hue="model", ax=ax)
    ax.axhline(25, ls="--", c="gray", lw=1)
    ax.set_xlabel("correct-answer template")
    ax.set_ylabel("MCQ accuracy (%)")
    fig.tight_layout()
    return fig
