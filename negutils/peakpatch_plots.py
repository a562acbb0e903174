"""Chapter 03's figures: training curves, the layer sweep, t-SNE maps and ECN attention."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def plot_training(history: pd.DataFrame):
    """Held-out MCQ accuracy and total loss per epoch for every variant."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.4))
    sns.lineplot(data=history, x="epoch", y="held-out MCQ accuracy", hue="variant", marker="o", ax=left)
    sns.lineplot(data=history, x="epoch", y="loss total", hue="variant", marker="o", ax=right, legend=False)
    left.set_title("held-out MCQ accuracy (the checkpoint criterion)")
    right.set_title("training loss L_ECN + lambda L_SCN")
    right.set_ylabel("mean loss per epoch")
    fig.tight_layout()
    return fig


def plot_layer_sweep(sweep: pd.DataFrame, chosen: tuple[int, int]):
    """Held-out MCQ accuracy per (l_a, l_p), the LCD rule's choice boxed (PeakPatch Fig. 4)."""
    grid = sweep.pivot(index="l_a", columns="l_p", values="held-out MCQ accuracy")
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    sns.heatmap(100 * grid, annot=True, fmt=".1f", cmap="viridis", ax=ax, cbar_kws={"label": "held-out MCQ %"})
    l_a, l_p = chosen
    if l_a in grid.index and l_p in grid.columns:
        ax.add_patch(plt.Rectangle((list(grid.columns).index(l_p), list(grid.index).index(l_a)), 1, 1, fill=False,
                                   edgecolor="red", linewidth=2.5))
    ax.set_xlabel("peak layer l_p")
    ax.set_ylabel("anchor layer l_a")
    ax.set_title("Joint PeakPatch by layer choice (red: the LCD rule's pick)")
    fig.tight_layout()
    return fig


def plot_embedding_maps(before: pd.DataFrame, after: pd.DataFrame):
    """t-SNE of affirmative (circles) and negated (crosses) captions, before and after the ECN."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, frame, title in ((axes[0], before, "frozen encoder f_T"), (axes[1], after, "after the ECN (f_hat)")):
        sns.scatterplot(data=frame, x="x", y="y", hue="category", style="polarity", markers={"affirmative": "o",
                        "negated": "X"}, s=45, ax=ax, legend=ax is axes[1])
        ax.set_title(title)
        ax.set_xlabel("t-SNE 1")
        ax.set_ylabel("t-SNE 2")
    axes[1].legend(fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    fig.tight_layout()
    return fig


def plot_attention_heads(attention: pd.DataFrame):
    """Mean ECN attention per head on negation-cue tokens vs content tokens (PeakPatch Fig. 7)."""
    long = attention.melt(id_vars="head", value_vars=["negation", "content"], var_name="token type",
                          value_name="mean attention")
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    sns.barplot(data=long, x="head", y="mean attention", hue="token type", ax=ax)
    ax.set_xlabel("ECN cross-attention head")
    ax.set_title("Where the learned query looks")
    fig.tight_layout()
    return fig


def plot_mcq_methods(table: pd.DataFrame, split: str = "COCO/val"):
    """MCQ accuracy per template for every method on one split (the Table 1 analogue as bars)."""
    long = table[split].reset_index().melt(id_vars="method", var_name="template", value_name="accuracy %")
    fig, ax = plt.subplots(figsize=(11, 3.6))
    sns.barplot(data=long, x="method", y="accuracy %", hue="template", ax=ax)
    ax.set_xlabel("")
    ax.set_title(f"NegBench MCQ on {split} by correct template")
    ax.legend(title="template", bbox_to_anchor=(1.01, 1), loc="upper left")
    ax.tick_params(axis="x", rotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    fig.tight_layout()
    return fig
