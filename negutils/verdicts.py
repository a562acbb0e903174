"""Plain verdicts on the papers' claims, computed from our numbers with a rule printed beside each.

A verdict is "reproduced", "partly" or "not reproduced" *on this backbone*; the rule column says
exactly which inequality decided it, so a reader can disagree with the threshold, not the number.
"""
from __future__ import annotations

import pandas as pd

REPRODUCED, PARTLY, NOT_REPRODUCED = "reproduced", "partly", "not reproduced"


def claim(text: str, source: str, paper: str, ours: str, rule: str, reproduced: bool,
          partly: bool = False) -> dict:
    """One row of a verdict table; ``partly`` only counts when ``reproduced`` is false."""
    verdict = REPRODUCED if reproduced else PARTLY if partly else NOT_REPRODUCED
    return {"claim": text, "source": source, "paper": paper, "ours": ours, "rule": rule, "verdict": verdict}


def collapse_verdicts(m: dict) -> pd.DataFrame:
    """Chapter 02's claims. ``m`` holds the measures ``collapse_measures`` returns."""
    rows = [
        claim("D_LCD rises through the middle layers, then falls (representational collapse)",
              "PeakPatch sec. 3.2, Fig. 2", "peak at l_p = 8 of 12 (ViT-B/32)",
              f"shape: {m['lcd_shape']}; peak at layer {m['l_p']} of {m['n_layers']}",
              "reproduced: interior peak whose 95% CI lies above layers 1 and L; partly: rises without falling",
              m["lcd_shape"] == "rise-and-fall", m["lcd_shape"] == "rising"),
        claim("Training overwrites the affirmative/negated distinction most in the final layers",
              "PeakPatch sec. 3.2 (measured against the untrained encoder)",
              "collapse zone l_p+1..L, where alignment dominates",
              f"training retained {100 * m['retained_peak']:.0f}% of the untrained D_LCD at l_p, "
              f"{100 * m['retained_final']:.0f}% at layer L (least at layer {m['retained_min_layer']})",
              "reproduced: least retained at layer L, and 5 points less than at l_p; partly: less at L than at l_p",
              m["retained_min_layer"] == m["n_layers"] and m["retained_final"] < m["retained_peak"] - 0.05,
              m["retained_final"] < m["retained_peak"]),
        claim("Visual alignment A(l) climbs with depth, steeply in the upper-middle layers",
              "PeakPatch sec. 3.2", "A low early, sharp rise in upper-middle layers",
              f"A(1) = {m['alignment_first']:.3f}, A(L) = {m['alignment_final']:.3f}; ascent at layer {m['ascent']}",
              "reproduced: A(L) > A(1) and the ascent starts after layer L/2; partly: A(L) > A(1) only",
              m["alignment_final"] > m["alignment_first"] and m["ascent"] > m["n_layers"] / 2,
              m["alignment_final"] > m["alignment_first"]),
        claim("Only negation rises and falls; paraphrase stays near zero; random captions rise monotonically",
              "PeakPatch sec. 4.4, Fig. 6", "negation: rise-and-fall; paraphrase ~0; random: rising",
              f"negation {m['lcd_shape']}, paraphrase max {m['paraphrase_max']:.3f}, random {m['random_shape']} "
              f"(minimal pair: {m['minimal_shape']}, max {m['minimal_max']:.3f} at layer {m['minimal_peak_layer']})",
              "reproduced: all three hold; partly: paraphrase max < 1/4 of negation max",
              m["lcd_shape"] == "rise-and-fall" and m["random_shape"] == "rising"
              and m["paraphrase_max"] < 0.25 * m["lcd_max"],
              m["paraphrase_max"] < 0.25 * m["lcd_max"]),
        claim("A linear probe separates negated from affirmative best in the middle layers",
              "PeakPatch App. 0.D", "87.6% (layer 1) -> 94.0% (layer 5) -> 87.9% (layer L)",
              f"{100 * m['probe_first_layer']:.1f}% -> {100 * m['probe_peak']:.1f}% (layer {m['probe_peak_layer']}) "
              f"-> {100 * m['probe_final_layer']:.1f}%",
              "reproduced: interior peak above both ends; partly: any layer above 75%",
              1 < m["probe_peak_layer"] < m["n_layers"] and m["probe_peak"] > max(m["probe_first_layer"], m["probe_final_layer"]),
              m["probe_peak"] > 0.75),
        claim("The encoder detects concepts: 'a X' ranks images with X first", "LCSE sec. 3", "AUC 0.88",
              f"AUC {m['detection_auc']:.2f}", "reproduced: AUC >= 0.75; partly: AUC > 0.55",
              m["detection_auc"] >= 0.75, m["detection_auc"] > 0.55),
        claim("'no X' ranks images almost like 'a X'", "LCSE sec. 3", "Spearman rho 0.94",
              f"rho {m['rho_negation']:.2f}", "reproduced: rho >= 0.8; partly: rho >= 0.5",
              m["rho_negation"] >= 0.8, m["rho_negation"] >= 0.5),
        claim("Operators drop out: 'and' -> 'or' moves rankings no more than rewording; only a new concept does",
              "LCSE Fig. 3", "rephrase 0.95, swap 0.94, replacement 0.47, unrelated 0.27",
              f"rephrase {m['rho_rephrase']:.2f}, swap {m['rho_operator_swap']:.2f}, "
              f"replacement {m['rho_concept_replacement']:.2f}, unrelated {m['rho_unrelated']:.2f}",
              "reproduced: swap within 0.1 of rephrase and replacement below swap - 0.2; partly: one of the two",
              abs(m["rho_rephrase"] - m["rho_operator_swap"]) <= 0.1
              and m["rho_concept_replacement"] < m["rho_operator_swap"] - 0.2,
              abs(m["rho_rephrase"] - m["rho_operator_swap"]) <= 0.1
              or m["rho_concept_replacement"] < m["rho_operator_swap"] - 0.2),
        claim("'no X' has inverted polarity: images with X outscore images without", "LCSE Table 1", "AUC 11.2%",
              f"AUC {100 * m['polarity_auc']:.1f}%", "reproduced: AUC < 40%; partly: AUC < 50%",
              m["polarity_auc"] < 0.4, m["polarity_auc"] < 0.5),
        claim("Anti-monotone operators invert: ¬A prefers images with A, ¬A∧¬B never prefers Neither",
              "LCSE Fig. 2", "¬A -> A-present 91%; ¬A∧¬B -> Neither 0%",
              f"¬A -> A-present {100 * m['quadrant_not_a_prefers_a']:.0f}%; "
              f"¬A∧¬B -> Neither {100 * m['quadrant_nor_neither']:.0f}%",
              "reproduced: ¬A -> A-present > 75% and Neither <= 10%; partly: > 50% or <= 10%",
              m["quadrant_not_a_prefers_a"] > 0.75 and m["quadrant_nor_neither"] <= 0.1,
              m["quadrant_not_a_prefers_a"] > 0.5 or m["quadrant_nor_neither"] <= 0.1),
        claim("Conjunction scores follow mean(s_A, s_B) more than min(s_A, s_B)", "LCSE sec. 3, Fig. 4",
              "rho 0.82 (mean) vs 0.74 (min)", f"rho {m['rho_and_mean']:.2f} vs {m['rho_and_min']:.2f}",
              "reproduced: rho with mean > rho with min", m["rho_and_mean"] > m["rho_and_min"]),
        claim("The ¬A residual is correctly aligned and amplifying it recovers polarity", "LCSE sec. 3, Fig. 5",
              "alignment 68%; holistic 12% -> ~66% amplified",
              f"alignment {100 * m['alignment_not']:.0f}%; holistic {100 * m['holistic_auc_not']:.0f}% -> "
              f"{100 * m['amplified_auc_not']:.0f}% at lambda={m['amplification']:g}",
              "reproduced: alignment > 50% and amplified AUC > 50%; partly: alignment > 50%",
              m["alignment_not"] > 0.5 and m["amplified_auc_not"] > 0.5, m["alignment_not"] > 0.5),
        claim("The ¬A∧¬B residual is misaligned (encodes salience, not absence)", "LCSE sec. 3, App. C.3",
              "alignment 17%", f"alignment {100 * m['alignment_nor']:.0f}%",
              "reproduced: alignment < 40%; partly: < 50%", m["alignment_nor"] < 0.4, m["alignment_nor"] < 0.5),
        claim("Negation is encoded: Delta_X = g('not X') - g('X') is consistent across concepts, correct in polarity",
              "LCSE App. C.2", "cosine 0.62 (random 0.00), AUC 0.70",
              f"cosine {m['delta_cosine']:.2f} (random {m['random_cosine']:.2f}), AUC {m['delta_auc']:.2f}",
              "reproduced: cosine > random + 0.3 and AUC > 0.6; partly: one of the two",
              m["delta_cosine"] > m["random_cosine"] + 0.3 and m["delta_auc"] > 0.6,
              m["delta_cosine"] > m["random_cosine"] + 0.3 or m["delta_auc"] > 0.6),
        claim("Affirmative-dominated training never drives beta_c-(q) below its unmentioned level (no rejection)",
              "KTN sec. 3.2, Theorem 1", "beta_c-(q) >= 0 at best (= 0 for the optimum)",
              f"median beta(negated) - beta(control) {m['dilution_pull']:+.3f}; below control in "
              f"{100 * m['dilution_share_below']:.0f}% of pairs; survival ratio {m['survival_ratio']:.2f}",
              "reproduced: median >= 0 and < 10% of pairs below control; partly: median >= 0",
              m["dilution_pull"] >= 0 and m["dilution_share_below"] < 0.1, m["dilution_pull"] >= 0),
    ]
    return pd.DataFrame(rows)


def collapse_measures(lcd, untrained: pd.DataFrame, concepts: pd.DataFrame, rankings: pd.DataFrame,
                      shares: pd.DataFrame, span: pd.DataFrame, null: pd.DataFrame, delta_summary: dict,
                      dilution: dict, amplification: float = 16.0) -> dict:
    """Chapter 02's numbers under the metric names of ``paper_numbers.csv`` (benchmark
    "collapse"), plus what the verdict rules need. ``lcd`` is a ``collapse.LcdAnalysis`` and
    ``untrained`` the table ``collapse.against_untrained`` returns."""
    from .collapse import curve_shape

    negated, alignment = lcd.curve("negated"), lcd.curve("affirmative", "A")
    probe = lcd.probe["probe accuracy"].to_numpy()
    rho = rankings.groupby("kind")["rho"].mean()
    by_op = span.groupby("operator").mean(numeric_only=True)
    return {
        "l_p": lcd.choice.l_p, "l_a": lcd.choice.l_a, "ascent": lcd.choice.ascent, "n_layers": len(negated),
        "lcd_max": float(negated["mean"].max()), "lcd_final": float(negated["mean"].iloc[-1]),
        "lcd_shape": curve_shape(negated), "random_shape": curve_shape(lcd.curve("random")),
        "paraphrase_max": float(lcd.curve("paraphrase")["mean"].max()),
        "minimal_shape": curve_shape(lcd.curve("minimal pair")),
        "minimal_max": float(lcd.curve("minimal pair")["mean"].max()),
        "minimal_peak_layer": int(lcd.curve("minimal pair")["mean"].to_numpy().argmax()) + 1,
        "retained_peak": float(untrained["retained"].iloc[lcd.choice.l_p - 1]),
        "retained_final": float(untrained["retained"].iloc[-1]),
        "retained_min_layer": int(untrained["retained"].to_numpy().argmin()) + 1,
        "alignment_first": float(alignment["mean"].iloc[0]), "alignment_final": float(alignment["mean"].iloc[-1]),
        "probe_first_layer": float(probe[0]), "probe_peak": float(probe.max()),
        "probe_peak_layer": int(probe.argmax()) + 1, "probe_final_layer": float(probe[-1]),
        "detection_auc": float(concepts["detection AUC"].mean()),
        "polarity_auc": float(concepts["polarity AUC"].mean()),
        "rho_negation": float(rho["negation"]), "rho_rephrase": float(rho["rephrase"]),
        "rho_operator_swap": float(rho["operator swap"]),
        "rho_concept_replacement": float(rho["concept replacement"]), "rho_unrelated": float(rho["unrelated"]),
        "quadrant_not_a_prefers_a": float(shares.loc["¬A", "Both"] + shares.loc["¬A", "A-only"]),
        "quadrant_and_both": float(shares.loc["A∧B", "Both"]),
        "quadrant_nor_neither": float(shares.loc["¬A∧¬B", "Neither"]),
        "rho_and_mean": float(by_op.loc["A∧B", "rho with mean"]), "rho_and_min": float(by_op.loc["A∧B", "rho with min"]),
        # the paper's 0.51-0.53 is the range of per-operator means over the two-concept operators
        "span_weight_low": float(by_op["span weight A"].dropna().min()),
        "span_weight_high": float(by_op["span weight A"].dropna().max()),
        "null_percentile_not": float(null["percentile"].mean()), "null_z_not": float(null["z"].mean()),
        "holistic_auc_not": float(by_op.loc["¬A", "holistic AUC"]), "alignment_not": float(by_op.loc["¬A", "alignment"]),
        "amplified_auc_not": float(by_op.loc["¬A", f"AUC at lambda={amplification:g}"]),
        "amplification": amplification, "alignment_nor": float(by_op.loc["¬A∧¬B", "alignment"]),
        "delta_norm": delta_summary["mean norm"], "delta_cosine": delta_summary["pairwise cosine"],
        "random_cosine": delta_summary["random pairwise cosine"], "delta_auc": delta_summary["mean delta AUC"],
        "dilution_pull": dilution["median negated - control"],
        "dilution_share_below": dilution["share negated below control"],
        "survival_ratio": dilution["median survival ratio"],
        "beta_negated": dilution["median beta_c- negated"],
    }
