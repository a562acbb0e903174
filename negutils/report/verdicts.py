"""Plain verdicts on the papers' claims, computed from our numbers with a rule printed beside each.

A verdict is "reproduced", "partly" or "not reproduced" *on this backbone*; the rule column says
exactly which inequality decided it, so a reader can disagree with the threshold, not the number.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.results import result_value
from ..diagnosis.collapse import curve_shape
from .papers import paper_value

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


def ktn_verdicts(results: pd.DataFrame, lemma: dict, vanilla: str = "vanilla", ec: str = "EC",
                 ktn: str = "KTN", dim1: str = "KTN (projection only)") -> pd.DataFrame:
    """Chapter 04's claims, from its results frame and ``lemma1_summary``."""
    v = lambda m, t, c, s="val": 100 * result_value(results, m, t, c, s)  # noqa: E731
    c2 = {m: v(m, "confusion_2c", "mAP") for m in (vanilla, ec, ktn, dim1)}
    c3 = {m: v(m, "confusion_3c", "mAP") for m in (vanilla, ec, ktn)}
    mcq = {(m, s): v(m, "mcq", "accuracy", s) for m in (vanilla, ec, ktn, dim1) for s in ("val", "ood")}
    r5 = {m: v(m, "retrieval", "R@5") for m in (vanilla, ktn)}
    rneg = {m: v(m, "retrieval_negated", "R@5") for m in (vanilla, ec, ktn)}
    rows = [
        claim("KTN raises COCO-Confusion 2C mAP well above the vanilla model", "KTN Table 1", "63.2 -> 82.8 (ViT-B/32)",
              f"{c2[vanilla]:.1f} -> {c2[ktn]:.1f}", "reproduced: +5 points or more; partly: any gain",
              c2[ktn] - c2[vanilla] >= 5, c2[ktn] > c2[vanilla]),
        claim("Rejection beats dilution: KTN above Embedding Correction on 2C and 3C", "KTN Table 1, sec. 5.3",
              "2C 82.8 vs 73.2, 3C 75.2 vs 70.8", f"2C {c2[ktn]:.1f} vs {c2[ec]:.1f}, 3C {c3[ktn]:.1f} vs {c3[ec]:.1f}",
              "reproduced: higher on both; partly: on one", c2[ktn] > c2[ec] and c3[ktn] > c3[ec],
              c2[ktn] > c2[ec] or c3[ktn] > c3[ec]),
        claim("KTN improves NegBench MCQ over Embedding Correction", "KTN Table 1", "COCO 79.5 vs 70.0, VOC 92.1 vs 75.5",
              f"val {mcq[(ktn, 'val')]:.1f} vs {mcq[(ec, 'val')]:.1f}, ood {mcq[(ktn, 'ood')]:.1f} vs {mcq[(ec, 'ood')]:.1f}",
              "reproduced: higher on val and ood; partly: on one", mcq[(ktn, "val")] > mcq[(ec, "val")] and
              mcq[(ktn, "ood")] > mcq[(ec, "ood")], mcq[(ktn, "val")] > mcq[(ec, "val")] or mcq[(ktn, "ood")] > mcq[(ec, "ood")]),
        claim("Standard retrieval is preserved and negated retrieval improves", "KTN sec. 5.3",
              "R@5 65.2 = 65.2; R-Neg@5 57.9 -> 62.0", f"R@5 {r5[vanilla]:.1f} -> {r5[ktn]:.1f}; R-Neg@5 "
              f"{rneg[vanilla]:.1f} -> {rneg[ktn]:.1f}", "reproduced: R@5 within 0.5 and R-Neg@5 up; partly: R@5 kept",
              abs(r5[ktn] - r5[vanilla]) <= 0.5 and rneg[ktn] > rneg[vanilla], abs(r5[ktn] - r5[vanilla]) <= 0.5),
        claim("The image-side rejection dimension adds to projection on MCQ and Confusion", "KTN Table 3",
              "MCQ 55.1 -> 81.0, Conf-2C 78.6 -> 87.1 (SigLIP2 SO400M)",
              f"MCQ {mcq[(dim1, 'val')]:.1f} -> {mcq[(ktn, 'val')]:.1f}, Conf-2C {c2[dim1]:.1f} -> {c2[ktn]:.1f}",
              "reproduced: +1 point or more on both; partly: on one",
              mcq[(ktn, "val")] - mcq[(dim1, "val")] >= 1 and c2[ktn] - c2[dim1] >= 1,
              mcq[(ktn, "val")] - mcq[(dim1, "val")] >= 1 or c2[ktn] - c2[dim1] >= 1),
        claim("Vanilla text coefficients on the negated concept are positive, so confusing images win",
              "KTN sec. 3.2-3.3, Fig. 3", "beta_c- >= 0; all top-5 confusing",
              f"beta_c- > 0 in {100 * lemma['share beta_c- > 0']:.0f}% of galleries; confusing above correct in "
              f"{100 * lemma['share measured gap < 0 (confusing above correct)']:.0f}%",
              "reproduced: beta > 0 in 90% and confusing on top in half; partly: beta > 0 in 90%",
              lemma["share beta_c- > 0"] >= 0.9 and lemma["share measured gap < 0 (confusing above correct)"] >= 0.5,
              lemma["share beta_c- > 0"] >= 0.9),
        claim("Lemma 1: the correct-minus-confusing gap is -alpha_c- beta_c-", "KTN Lemma 1 (linear concept model)",
              "exact under the model", f"corr(measured, predicted) = {lemma['corr(measured, predicted)']:.2f}, sign agreement "
              f"{100 * lemma['sign agreement']:.0f}%", "reproduced: corr >= 0.5 and signs agree in 80%; partly: signs in 50%",
              lemma["corr(measured, predicted)"] >= 0.5 and lemma["sign agreement"] >= 0.8, lemma["sign agreement"] > 0.5),
        claim("Corollary 1: the in-kind optimum puts no negative weight on c-", "KTN Theorem 1, Corollary 1",
              "beta*_c- = 0", f"median beta*_c- = {lemma['median beta*_c- (optimum)']:.3f}; negative in "
              f"{100 * lemma['share beta*_c- < 0']:.0f}% of galleries", "reproduced: median >= 0 and negative in at most 10%; "
              "partly: median >= 0", lemma["median beta*_c- (optimum)"] >= 0 and lemma["share beta*_c- < 0"] <= 0.1,
              lemma["median beta*_c- (optimum)"] >= 0),
        claim("No single text vector reaches what rejection reaches", "KTN sec. 3.2 (dilution ceiling)",
              "single-embedding methods plateau below KTN", f"in-kind optimum AP {100 * lemma['mean optimum AP']:.1f} vs "
              f"KTN {c2[ktn]:.1f} on 2C", "reproduced: optimum below KTN", lemma["mean optimum AP"] * 100 < c2[ktn]),
    ]
    return pd.DataFrame(rows)


def lcse_verdicts(results: pd.DataFrame, m: dict, holistic: str = "vanilla", lcse: str = "LCSE") -> pd.DataFrame:
    """Chapter 05's claims; ``m`` holds the calibration, stratification and retention measures."""
    v = lambda meth, t, c, s="val": 100 * result_value(results, meth, t, c, s)  # noqa: E731
    fac = {x: v(x, "factor_operator", "accuracy") for x in (holistic, lcse)}
    anti = {x: np.mean([v(x, "factor_operator", f"accuracy[{t}]") for t in ("NOT", "NEITHER", "BUT-NOT")])
            for x in (holistic, lcse)}
    mcq = {(x, s): v(x, "mcq", "accuracy", s) for x in (holistic, lcse) for s in ("val", "ood")}
    nested = {x: v(x, "factor_nested", "accuracy") for x in (holistic, lcse)}
    gains = m["strata gains"]
    rows = [
        claim("LCSE raises FACTOR-Bench operator accuracy far above holistic scoring", "LCSE Table 2",
              "58.3 -> 85.5 (CLIP ViT-B/32)", f"{fac[holistic]:.1f} -> {fac[lcse]:.1f}",
              "reproduced: +10 points or more; partly: any gain", fac[lcse] - fac[holistic] >= 10, fac[lcse] > fac[holistic]),
        claim("Anti-monotone operators (NOT, NOR, BUT-NOT) gain most", "LCSE Table 5", "59.5 -> 84.4 (+24.9)",
              f"{anti[holistic]:.1f} -> {anti[lcse]:.1f}", "reproduced: +10 points; partly: any gain",
              anti[lcse] - anti[holistic] >= 10, anti[lcse] > anti[holistic]),
        claim("Zero-shot retrieval is retained", "LCSE Table 2", "R@5 55.3 -> 55.2, rho = .999",
              f"R@5 {100 * m['retention R@5 holistic']:.1f} -> {100 * m['retention R@5']:.1f}, rho = {m['retention rho']:.3f}",
              "reproduced: rho >= 0.99 and R@5 within 0.5; partly: rho >= 0.95",
              m["retention rho"] >= 0.99 and abs(m["retention R@5"] - m["retention R@5 holistic"]) <= 0.005,
              m["retention rho"] >= 0.95),
        claim("LCSE improves NegBench MCQ", "LCSE Table 2", "COCO 39.3 -> 60.3, VOC 38.7 -> 73.3",
              f"val {mcq[(holistic, 'val')]:.1f} -> {mcq[(lcse, 'val')]:.1f}, ood {mcq[(holistic, 'ood')]:.1f} -> "
              f"{mcq[(lcse, 'ood')]:.1f}", "reproduced: +5 points on both; partly: on one",
              mcq[(lcse, "val")] - mcq[(holistic, "val")] >= 5 and mcq[(lcse, "ood")] - mcq[(holistic, "ood")] >= 5,
              mcq[(lcse, "val")] - mcq[(holistic, "val")] >= 5 or mcq[(lcse, "ood")] - mcq[(holistic, "ood")] >= 5),
        claim("The gain scales with concept-detection quality", "LCSE Table 4", "+32.6 (AUC > .9) vs +24.0 (< .75)",
              ", ".join(f"{k}: {g:+.1f}" for k, g in gains.items()),
              "reproduced: LCSE above holistic in every populated bin and the high bin gains most; partly: one of the two",
              m["strata all positive"] and m["strata high gains most"], m["strata all positive"] or m["strata high gains most"]),
        claim("mu sets the sign of the negation correction; beta does not move NOT", "LCSE App. A, Tables 8-9",
              "NOT 58-88% over mu, 88.0 at every beta", f"NOT spans {m['NOT spread over mu']:.1f} points over mu, "
              f"{m['NOT spread over beta']:.1f} over beta", "reproduced: spread over mu >= 5 and over beta = 0; "
              "partly: spread over beta = 0", m["NOT spread over mu"] >= 5 and m["NOT spread over beta"] == 0,
              m["NOT spread over beta"] == 0),
        claim("Calibrated mu sits near the median similarity of present concepts", "LCSE App. A",
              "mu = 0.22 for CLIP", f"fitted mu = {m['mu']:.3f}; median present similarity {m['median present similarity']:.3f}",
              "reproduced: within 0.03; partly: within 0.06", abs(m["mu"] - m["median present similarity"]) <= 0.03,
              abs(m["mu"] - m["median present similarity"]) <= 0.06),
        claim("Nested queries: recursive aggregation beats holistic scoring", "LCSE App. I", "51.0 -> 80.5",
              f"{nested[holistic]:.1f} -> {nested[lcse]:.1f}", "reproduced: +10 points; partly: any gain",
              nested[lcse] - nested[holistic] >= 10, nested[lcse] > nested[holistic]),
        claim("Real parses cost almost nothing against oracle parses", "LCSE App. A, Table 6", "85.5 -> 85.2 (-0.3)",
              f"{m['factor oracle']:.1f} (oracle) -> {m['factor parser']:.1f} (our parser)",
              "reproduced: within 1 point; partly: within 3", abs(m["factor oracle"] - m["factor parser"]) <= 1,
              abs(m["factor oracle"] - m["factor parser"]) <= 3),
    ]
    return pd.DataFrame(rows)


def peakpatch_verdicts(results: pd.DataFrame, negfull: str, vanilla: str = "vanilla", joint: str = "PeakPatch (joint)",
                       ecn: str = "ECN only", scn: str = "SCN only") -> pd.DataFrame:
    """Chapter 03's claims on the trained methods, from the ``negbench`` protocol's results frame;
    ``negfull`` names the NegFull method chosen on held-out data."""
    v = lambda m, t, c, s="val": 100 * result_value(results, m, t, c, s)  # noqa: E731
    p = lambda row, col, table="Table 1": paper_value("PeakPatch", table, row, col)  # noqa: E731
    mcq = {m: v(m, "mcq", "accuracy") for m in (vanilla, negfull, joint, ecn, scn)}
    neg = {m: v(m, "mcq", "negative_accuracy") for m in (vanilla, negfull, joint)}
    r5 = {m: v(m, "retrieval", "R@5") for m in (vanilla, joint)}
    rho = result_value(results, joint, "retention", "rho")
    rows = [
        claim("Fine-tuning on negation data (NegFull) raises MCQ above the frozen model", "NegBench Table 1; "
              "PeakPatch Table 1", f"{p('CLIP', 'COCO Avg'):.1f} -> {p('CLIP + NF', 'COCO Avg'):.1f}",
              f"{mcq[vanilla]:.1f} -> {mcq[negfull]:.1f}", "reproduced: +5 points or more; partly: any gain",
              mcq[negfull] - mcq[vanilla] >= 5, mcq[negfull] > mcq[vanilla]),
        claim("Negative-template accuracy rises far above the frozen model's", "PeakPatch Table 1",
              f"Neg {p('CLIP', 'COCO Neg'):.1f} -> NF {p('CLIP + NF', 'COCO Neg'):.1f}, PeakPatch "
              f"{p('PeakPatch', 'COCO Neg'):.1f}", f"Neg {neg[vanilla]:.1f} -> NF {neg[negfull]:.1f}, "
              f"PeakPatch {neg[joint]:.1f}", "reproduced: both +20 points or more; partly: one of them",
              min(neg[negfull], neg[joint]) - neg[vanilla] >= 20, max(neg[negfull], neg[joint]) - neg[vanilla] >= 20),
        claim("PeakPatch (joint) beats encoder fine-tuning on MCQ", "PeakPatch Table 1",
              f"{p('PeakPatch', 'COCO Avg'):.1f} vs {p('CLIP + NF', 'COCO Avg'):.1f}",
              f"{mcq[joint]:.1f} vs {mcq[negfull]:.1f}", "reproduced: higher by 1 point or more; partly: higher",
              mcq[joint] - mcq[negfull] >= 1, mcq[joint] > mcq[negfull]),
        claim("The joint model beats both single modules on MCQ", "PeakPatch Table 5",
              f"{p('PeakPatch (joint)', 'MCQ Avg', 'Table 5'):.1f} vs ECN {p('ECN only', 'MCQ Avg', 'Table 5'):.1f}, "
              f"SCN {p('SCN only', 'MCQ Avg', 'Table 5'):.1f}", f"{mcq[joint]:.1f} vs ECN {mcq[ecn]:.1f}, SCN {mcq[scn]:.1f}",
              "reproduced: above both; partly: above one", mcq[joint] > max(mcq[ecn], mcq[scn]),
              mcq[joint] > min(mcq[ecn], mcq[scn])),
        claim("PeakPatch keeps standard retrieval", "PeakPatch sec. 3.3 (Inference), sec. 4.4",
              "corrections small on affirmative inputs", f"R@5 {r5[vanilla]:.1f} -> {r5[joint]:.1f}, rho {rho:.3f}",
              "reproduced: R@5 within 2 points and rho >= 0.95; partly: R@5 within 2 points",
              abs(r5[joint] - r5[vanilla]) <= 2 and rho >= 0.95, abs(r5[joint] - r5[vanilla]) <= 2),
    ]
    return pd.DataFrame(rows)
