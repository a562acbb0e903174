"""Figures of the KTN and LCSE chapters."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

CORRECT, CONFUSING = "#2e7d32", "#c62828"


def plot_lemma1(check: pd.DataFrame):
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.scatter(check["predicted gap"], check["measured gap"], s=14, alpha=0.6)
    lim = np.nanmax(np.abs(check[["predicted gap", "measured gap"]].to_numpy())) * 1.1
    left.plot([-lim, lim], [-lim, lim], color="grey", lw=0.8, ls="--")
    left.axhline(0, color="black", lw=0.6)
    left.axvline(0, color="black", lw=0.6)
    left.set(xlabel=r"predicted gap $-\beta_{c^-}(q)\,\Delta\bar\alpha_{c^-}$",
             ylabel="measured gap  mean s(correct) - mean s(confusing)", title="Lemma 1 per gallery")
    bins = np.linspace(min(check["beta_c-(q)"].min(), check["beta*_c- (optimum)"].min()) - 0.02,
                       max(check["beta_c-(q)"].max(), check["beta*_c- (optimum)"].max()) + 0.02, 30)
    right.hist(check["beta_c-(q)"], bins=bins, alpha=0.6, label=r"encoder's $\beta_{c^-}(q)$")
    right.hist(check["beta*_c- (optimum)"].dropna(), bins=bins, alpha=0.6, label=r"in-kind optimum $\beta^*_{c^-}$")
    right.axvline(0, color="black", lw=0.8)
    right.set(xlabel=r"text coefficient on the negated concept", ylabel="galleries",
              title="Theorem 1 / Corollary 1")
    right.legend(frameon=False)
    fig.tight_layout()
    return fig


def plot_dilution_vs_rejection(top: pd.DataFrame, query: str):
    methods = list(dict.fromkeys(top["method"]))
    fig, axes = plt.subplots(1, len(methods), figsize=(3.4 * len(methods), 3.2), sharey=True)
    for ax, method in zip(np.atleast_1d(axes), methods):
        rows = top[top["method"] == method]
        ax.bar(rows["rank"], rows["score"], color=[CORRECT if c else CONFUSING for c in rows["correct"]])
        ax.set(title=method, xlabel="rank", xticks=list(rows["rank"]))
    np.atleast_1d(axes)[0].set_ylabel("score")
    handles = [plt.Rectangle((0, 0), 1, 1, color=CORRECT), plt.Rectangle((0, 0), 1, 1, color=CONFUSING)]
    fig.legend(handles, ["correct (no c-)", "confusing (has c-)"], loc="upper center", ncol=2, frameon=False,
               bbox_to_anchor=(0.5, 1.08))
    fig.suptitle(f"\u201c{query}\u201d", y=1.14, fontsize=10)
    fig.tight_layout()
    return fig


def plot_separation(separation: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(7, 3.6))
    long = separation.melt(id_vars=["method"], value_vars=["correct", "confusing"], var_name="images",
                           value_name="mean score in gallery")
    sns.boxplot(data=long, x="method", y="mean score in gallery", hue="images", ax=ax,
                palette={"correct": CORRECT, "confusing": CONFUSING}, fliersize=2)
    ax.set(xlabel="", title="COCO-Confusion 2C: correct vs confusing images per gallery")
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    return fig


def plot_calibration_grid(grid: pd.DataFrame, chosen: tuple[float, float]):
    table = grid.pivot_table(index="beta", columns="mu", values="All") * 100
    fig, ax = plt.subplots(figsize=(8, 3.4))
    sns.heatmap(table, annot=True, fmt=".0f", cmap="viridis", ax=ax, cbar_kws={"label": "mean operator accuracy (%)"})
    cols, rows = list(table.columns), list(table.index)
    ax.add_patch(plt.Rectangle((int(np.argmin(np.abs(np.array(cols) - chosen[0]))),
                                int(np.argmin(np.abs(np.array(rows) - chosen[1])))), 1, 1, fill=False,
                               edgecolor="red", lw=2))
    ax.set_xticklabels([f"{c:.2f}" for c in cols], rotation=0)
    ax.set(xlabel=r"$\mu$", ylabel=r"$\beta$")
    fig.tight_layout()
    return fig


def plot_operator_accuracy(table: pd.DataFrame):
    long = table.drop(columns=["All"]).reset_index().melt(id_vars="method", var_name="operator",
                                                          value_name="accuracy (%)")
    fig, ax = plt.subplots(figsize=(9, 3.6))
    sns.barplot(data=long, x="operator", y="accuracy (%)", hue="method", ax=ax)
    ax.axhline(50, color="grey", ls="--", lw=0.8)
    ax.set(xlabel="FACTOR-Bench operator", ylim=(0, 100))
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    return fig
