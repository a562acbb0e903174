"""Chapter 03's figures: training curves, the layer sweep, t-SNE maps and ECN attention."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def plot_training(history: pd.DataFrame):
    """Held-out NegMCQ accuracy and total loss per epoch for every run (column ``run``)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.8))
    sns.lineplot(data=history, x="epoch", y="held-out MCQ accuracy", hue="run", marker="o", ax=left, legend=False)
    sns.lineplot(data=history[history["epoch"] > 0], x="epoch", y="loss total", hue="run", marker="o", ax=right)
    left.set_title("held-out NegMCQ accuracy (the checkpoint criterion)")
    right.set_title("training loss L_ECN + lambda L_SCN")
    right.set_ylabel("mean loss per epoch")
    right.legend(title="run", bbox_to_anchor=(1.01, 1), loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def plot_protocols(table: pd.DataFrame):
    """MCQ on val per template for each method under each negation-data protocol."""
    long = table.melt(id_vars=["protocol", "method"], value_vars=["Aff", "Neg", "Hyb", "MCQ val"],
                      var_name="template", value_name="accuracy %").replace({"template": {"MCQ val": "Avg"}})
    grid = sns.catplot(data=long, x="method", y="accuracy %", hue="template", col="protocol", kind="bar",
                       height=3.4, aspect=1.1)
    grid.set_axis_labels("", "MCQ accuracy on val (%)")
    grid.set_titles("protocol: {col_name}")
    for ax in grid.axes.flat:
        ax.tick_params(axis="x", rotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    grid.figure.tight_layout()
    return grid.figure


def plot_score_corrections(deltas: pd.DataFrame):
    """Delta s of the SCN on benchmark MCQ options by option polarity and truth, per protocol
    (column ``protocol``): a shortcut "negation is false" shows as about -0.2 on every negated option."""
    frame = deltas.assign(option=deltas["negated"].map({True: "negated", False: "affirmative"}) + ", "
                          + deltas["true"].map({True: "true", False: "false"}))
    fig, ax = plt.subplots(figsize=(9, 3.4))
    sns.boxplot(data=frame, x="option", y="delta s", hue="protocol", ax=ax, fliersize=1,
                order=["affirmative, true", "affirmative, false", "negated, true", "negated, false"])
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("benchmark MCQ option")
    ax.set_ylabel("SCN correction Delta s")
    ax.legend(title="protocol", bbox_to_anchor=(1.01, 1), loc="upper left")
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


def plot_learning_curve(curve: pd.DataFrame, benchmarks=("MCQ", "Neg", "R-Neg@5", "R@5", "rho", "VALSE")):
    """Each PeakPatch variant's value (with its 95% interval) against its negtrain images, one panel per
    benchmark; the frozen model (``negtrain images`` 0) as a dashed line with its band."""
    fig, axes = plt.subplots(1, len(benchmarks), figsize=(3.0 * len(benchmarks), 3.2))
    trained = curve[curve["negtrain images"] > 0]
    frozen = curve[curve["negtrain images"] == 0].set_index("benchmark")
    for ax, name in zip(axes, benchmarks):
        for variant, block in trained[trained["benchmark"] == name].groupby("variant", sort=False):
            block = block.sort_values("negtrain images")
            ax.errorbar(block["negtrain images"], block["value"],
                        yerr=[block["value"] - block["low"], block["high"] - block["value"]],
                        marker="o", ms=3, capsize=2, label=variant)
        if name in frozen.index:
            ax.axhline(frozen.loc[name, "value"], color="grey", ls="--", lw=1, label="frozen")
            ax.axhspan(frozen.loc[name, "low"], frozen.loc[name, "high"], color="grey", alpha=0.15)
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("negtrain images")
        ax.set_ylabel("rho" if name == "rho" else "%")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig
