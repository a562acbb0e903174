"""Chapter 02's figures: LCD and alignment curves, controls, probe, rankings, quadrants, residuals."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..diagnosis.bag_of_concepts import OPERATORS, expected_quadrants

CONDITION_COLOURS = {"negated": "tab:blue", "minimal pair": "tab:purple", "paraphrase": "tab:green",
                     "random": "tab:grey"}
CONDITION_TITLES = {"negated": "T+ vs T- (D_LCD)", "minimal pair": "'... with X' vs '... without X'",
                    "paraphrase": "T+ vs paraphrase", "random": "T+ vs another image's caption"}


def _band(ax, curve: pd.DataFrame, colour: str, label: str, marker: str = "o"):
    ax.plot(curve["layer"], curve["mean"], marker=marker, color=colour, label=label)
    ax.fill_between(curve["layer"], curve["lo"], curve["hi"], color=colour, alpha=0.2)


def plot_lcd(lcd, title: str = ""):
    """D_LCD (left axis) and A(l) (right axis) with 95% bootstrap bands and the chosen layers."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    _band(ax, lcd.curve("negated"), "tab:blue", "D_LCD (affirmative vs negated)")
    ax.set_xlabel("text layer l")
    ax.set_ylabel("D_LCD(l) = mean 1 - cos", color="tab:blue")
    right = ax.twinx()
    _band(right, lcd.curve("affirmative", "A"), "tab:red", "A(l) (affirmative vs image)", marker="s")
    right.set_ylabel("A(l) = mean cos(text, image)", color="tab:red")
    marks = ([(lcd.choice.l_p, "l_a = l_p", "--")] if lcd.choice.l_a == lcd.choice.l_p
             else [(lcd.choice.l_a, "l_a", ":"), (lcd.choice.l_p, "l_p", "--")])
    for layer, name, style in marks:
        ax.axvline(layer, color="black", linestyle=style, linewidth=1)
        ax.text(layer, ax.get_ylim()[1], f" {name} = {layer}", va="top", fontsize=9)
    ax.set_xticks(lcd.curve("negated")["layer"])
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], loc="center right", fontsize=8)
    ax.set_title(title or "Layer-wise compositional divergence and visual alignment")
    fig.tight_layout()
    return fig


def plot_lcd_controls(lcd):
    """D_LCD for negated, paraphrased and random partners (PeakPatch Fig. 6) and for the minimal
    pair that differs only in the cue, each on its own scale."""
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.2), sharex=True)
    for ax, condition in zip(axes, CONDITION_COLOURS):
        _band(ax, lcd.curve(condition), CONDITION_COLOURS[condition], condition)
        ax.set_title(CONDITION_TITLES[condition], fontsize=9)
        ax.set_xlabel("text layer l")
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    axes[0].set_ylabel("D_LCD(l)")
    fig.suptitle("LCD control experiment: which partner caption rises and falls?")
    fig.tight_layout()
    return fig


def plot_lcd_by_structure(curves: pd.DataFrame):
    """D_LCD (T+ vs T-) and A(l) per layer, one line with its 95% band per structure of T+
    (``diagnosis.collapse.lcd_by_structure``)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), sharex=True)
    palette = dict(zip(curves["structure"].unique(), sns.color_palette("colorblind")))
    for structure, block in curves.groupby("structure", sort=False):
        _band(left, block[block["quantity"] == "D_LCD"], palette[structure], structure)
        _band(right, block[block["quantity"] == "A"], palette[structure], structure, marker="s")
    left.set_ylabel("D_LCD(l) = mean 1 - cos(T+, T-)")
    right.set_ylabel("A(l) = mean cos(T+, image)")
    left.set_title("compositional divergence, by structure of T+", fontsize=10)
    right.set_title("visual alignment, by structure of T+", fontsize=10)
    for ax in (left, right):
        ax.set_xlabel("text layer l")
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    left.legend(title="T+ structure", fontsize=8)
    fig.tight_layout()
    return fig


def plot_probe(lcd, paper: tuple[float, float, float] | None = (0.876, 0.940, 0.879)):
    """Per-layer held-out probe accuracy, with PeakPatch's first/peak/final values for ViT-B/32."""
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(lcd.probe["layer"], lcd.probe["probe accuracy"], marker="o", label="organism")
    if paper is not None:
        ax.axhline(paper[1], color="tab:orange", linestyle="--", linewidth=1, label="PeakPatch ViT-B/32 peak (94.0%)")
    ax.set_xlabel("text layer l")
    ax.set_ylabel("probe accuracy (held-out pairs)")
    ax.set_ylim(0.45, 1.0)
    ax.axhline(0.5, color="grey", linewidth=0.8)
    ax.legend(fontsize=8)
    ax.set_title("Is negation linearly decodable from the EOS state?")
    fig.tight_layout()
    return fig


def plot_against_untrained(table: pd.DataFrame):
    """(a) D_LCD of the trained and the randomly initialised encoder; (b) the share training
    retained, and the probe accuracy of both."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    left.plot(table["layer"], table["D_LCD trained"], marker="o", label="trained")
    left.plot(table["layer"], table["D_LCD untrained"], marker="o", linestyle="--", color="tab:grey",
              label="same architecture, untrained")
    left.set_xlabel("text layer l")
    left.set_ylabel("D_LCD(l)")
    left.set_title("(a) divergence before and after pretraining")
    left.legend(fontsize=8)
    right.plot(table["layer"], table["retained"], marker="o", color="tab:blue",
               label="D_LCD retained (trained / untrained)")
    right.plot(table["layer"], table["probe trained"], marker="s", color="tab:red", label="probe accuracy, trained")
    right.plot(table["layer"], table["probe untrained"], marker="s", linestyle="--", color="tab:grey",
               label="probe accuracy, untrained")
    right.set_xlabel("text layer l")
    right.set_ylabel("ratio / accuracy")
    right.set_ylim(0, 1.05)
    right.set_title("(b) what training removed, layer by layer")
    right.legend(fontsize=8, loc="lower left")
    for ax in (left, right):
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    fig.tight_layout()
    return fig


def plot_ranking_similarity(rankings: pd.DataFrame, paper: dict[str, float] | None = None):
    """Spearman rho between query rankings per kind (LCSE Fig. 3), with the paper's means."""
    order = ["rephrase", "operator swap", "negation", "concept replacement", "unrelated"]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    sns.boxplot(data=rankings, x="kind", y="rho", order=order, ax=ax, color="tab:blue", fliersize=2)
    if paper:
        xs = [k for k, kind in enumerate(order) if kind in paper]
        ax.scatter(xs, [paper[order[k]] for k in xs], marker="D", color="tab:orange", zorder=5,
                   label="LCSE, CLIP ViT-B/32")
        ax.legend(fontsize=8)
    ax.set_xlabel("what changes between the two queries")
    ax.set_ylabel("Spearman rho of image rankings")
    ax.set_title("Do operators change rankings, or only concepts?")
    fig.tight_layout()
    return fig


def plot_concept_polarity(concepts: pd.DataFrame):
    """Per concept: detection AUC of 'a X' against polarity AUC of 'no X'."""
    fig, ax = plt.subplots(figsize=(4.8, 4.2))
    ax.scatter(concepts["detection AUC"], concepts["polarity AUC"])
    for name, x, y in zip(concepts["concept"], concepts["detection AUC"], concepts["polarity AUC"]):
        ax.annotate(name, (x, y), fontsize=7, alpha=0.7)
    ax.axhline(0.5, color="grey", linewidth=0.8)
    ax.axvline(0.5, color="grey", linewidth=0.8)
    ax.set_xlabel("detection AUC of 'a X' (X present above absent)")
    ax.set_ylabel("polarity AUC of 'no X' (absent above present)")
    ax.set_title("Recognised, yet negation points the wrong way?")
    fig.tight_layout()
    return fig


def plot_quadrant_heatmap(shares: pd.DataFrame):
    """% of concept pairs whose highest mean score falls in each quadrant; correct cells boxed."""
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    sns.heatmap(100 * shares, annot=True, fmt=".0f", cmap="Blues", vmin=0, vmax=100, ax=ax,
                cbar_kws={"label": "% of pairs"})
    for r, op in enumerate(shares.index):
        for q in expected_quadrants(op):
            c = list(shares.columns).index(q)
            ax.add_patch(plt.Rectangle((c, r), 1, 1, fill=False, edgecolor="tab:green", linewidth=2.5))
    ax.set_xlabel("quadrant with the highest mean holistic score")
    ax.set_ylabel("query operator")
    ax.set_title("Quadrant preference (green: correct quadrants)")
    fig.tight_layout()
    return fig


def plot_span_residual(span: pd.DataFrame):
    """(a) residual alignment vs gain per pair and operator; (b) AUC as the residual is amplified."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    palette = dict(zip(OPERATORS, sns.color_palette("tab10", len(OPERATORS))))
    sns.scatterplot(data=span, x="gain", y="alignment", hue="operator", hue_order=list(OPERATORS), palette=palette,
                    ax=left, s=14, alpha=0.6)
    left.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    left.set_xlabel("gain G = Var(z_perp) / (Var(z_span) + Var(z_perp))")
    left.set_ylabel("residual alignment (AUC of z_perp)")
    left.set_title("(a) is the residual right, and does it matter?")
    columns = [c for c in span.columns if c.startswith("AUC at lambda=")]
    lambdas = [float(c.split("=")[1]) for c in columns]
    means = span.groupby("operator")[columns].mean()
    for op in OPERATORS:
        right.plot(lambdas, means.loc[op].to_numpy(), marker="o", color=palette[op], label=op)
    right.set_xscale("log", base=2)
    right.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    right.set_xlabel("amplification lambda in t_span + lambda t_perp (lambda=1: holistic)")
    right.set_ylabel("AUC for satisfying images")
    right.set_title("(b) amplifying the residual")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_dilution(coefficients: pd.DataFrame):
    """Where a negated mention leaves beta_c-, relative to not mentioning c- at all."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    bins = np.linspace(min(coefficients["negated - control"].min(), coefficients["affirmed - control"].min(), 0),
                       max(coefficients["negated - control"].max(), coefficients["affirmed - control"].max()), 40)
    ax.hist(coefficients["affirmed - control"], bins=bins, alpha=0.5, label="'A c+ and a c- are present.'")
    ax.hist(coefficients["negated - control"], bins=bins, alpha=0.5, label="'A c+ is present but no c-.'")
    ax.axvline(0, color="black", linewidth=1)
    ax.set_xlabel("beta_c-(q) - beta_c-('A c+ is present.')   (< 0 would be rejection)")
    ax.set_ylabel("concept pairs")
    ax.set_title("Text coefficient of the negated concept")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_lcd_through_pretraining(curves: pd.DataFrame):
    """D_LCD (left) and A (right) per text layer at each pretraining snapshot (``step``), coloured from the
    first snapshot (light) to the final weights (dark), with the final curve's bootstrap band."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    steps = sorted(curves["step"].unique())
    colours = plt.cm.viridis_r(np.linspace(0.15, 1.0, len(steps)))
    for ax, quantity, title in zip(axes, ("D_LCD", "A"), ("compositional divergence D_LCD",
                                                          "alignment A with the image")):
        for step, colour in zip(steps, colours):
            block = curves[(curves["step"] == step) & (curves["quantity"] == quantity)].sort_values("layer")
            ax.plot(block["layer"], block["mean"], "o-", ms=3, color=colour, label=f"step {step}")
            if step == steps[-1]:
                ax.fill_between(block["layer"], block["lo"], block["hi"], color=colour, alpha=0.2)
        ax.set_title(title)
        ax.set_xlabel("text layer")
        ax.set_ylabel("mean over diagnostic pairs")
    axes[1].legend(title="pretraining", fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
