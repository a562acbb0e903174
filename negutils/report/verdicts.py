"""Plain verdicts on the papers' claims, computed from our numbers by rules that are data.

Each claim is one ``Claim`` record: the paper's numbers it rests on (looked up in
``paper_numbers.csv`` by paper, table, row and column, never typed again), how to print them and
ours, and the rule as two conditions over our measures. The condition text is both what is
evaluated and what the verdict table prints, so a reader sees exactly the inequality that
decided, and can disagree with the threshold, not the number.

A verdict is "reproduced", "partly" or "not reproduced" *on this backbone*; "not measured" when a
measure the rule needs is missing (NaN), so an absent result is never read as a failed claim.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..core.results import ResultsError, read_results_file, result_value
from ..diagnosis.collapse import curve_shape
from ..methods.registry import method_label
from .papers import paper_value

REPRODUCED, PARTLY, NOT_REPRODUCED, NOT_MEASURED = "reproduced", "partly", "not reproduced", "not measured"
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, NOT_MEASURED)

PaperRef = tuple[str, str, str, str]   # (paper, table, row, column) in paper_numbers.csv


def read_verdicts(path) -> pd.DataFrame:
    """A chapter's verdict table (``judge``'s, as ``write_results`` wrote it) from ``path``, checked by
    ``check_verdicts``: the tallies count each claim once and every verdict in its kind."""
    table = read_results_file(path)
    check_verdicts(table, str(path))
    return table


def check_verdicts(table: pd.DataFrame, source: str = "verdicts") -> None:
    """Refuse a verdict table where a claim appears twice (it would be counted twice) or a verdict is
    not one of ``VERDICTS``. An unknown spelling ("Reproduced") is refused rather than case-folded:
    only ``judge`` writes verdicts, from ``VERDICTS``, so another value means the file was written by
    something else, and guessing what it meant would count a verdict that no rule gave."""
    missing = [c for c in ("claim", "verdict") if c not in table]
    if missing:
        raise ResultsError(f"{source} has no column {missing} (has {list(table.columns)}): not a verdict table")
    repeated = table[table["claim"].duplicated(keep=False)]
    if len(repeated):
        claim = repeated["claim"].iloc[0]
        lines = ", ".join(str(i + 2) for i in repeated.index[repeated["claim"] == claim])   # line 1 is the header
        raise ResultsError(f"{source}: the claim {claim!r} is on lines {lines}; each claim is judged once, and a "
                           "repeated row would count it again")
    unknown = table[~table["verdict"].isin(VERDICTS)]
    if len(unknown):
        i = unknown.index[0]
        raise ResultsError(f"{source}, line {i + 2} (claim {table.loc[i, 'claim']!r}): verdict "
                           f"{table.loc[i, 'verdict']!r} is not one of {list(VERDICTS)}")


@dataclass(frozen=True)
class Claim:
    """One claim as data.

    ``paper`` and ``ours`` are f-string templates: ``paper`` over ``numbers`` (name -> a
    ``PaperRef``, or a tuple of them for a list of values), ``ours`` over the chapter's measures.
    ``reproduced`` and ``partly`` are conditions over the measures in Python expression syntax
    (``abs``, ``min``, ``max`` allowed); ``partly`` counts only when ``reproduced`` fails.
    ``section`` is the label of the chapter section whose table or figure shows the evidence (the
    chapter's findings box links the claim there)."""
    text: str
    source: str
    paper: str
    ours: str
    reproduced: str
    partly: str | None = None
    numbers: Mapping[str, PaperRef | tuple[PaperRef, ...]] = field(default_factory=dict)
    section: str | None = None

    @property
    def rule(self) -> str:
        return f"reproduced: {self.reproduced}" + (f"; partly: {self.partly}" if self.partly else "")


_FUNCTIONS = {"abs": abs, "min": min, "max": max}


def _evaluate(expression: str, names: Mapping, claim: Claim):
    try:
        return eval(expression, {"__builtins__": {}, **_FUNCTIONS}, dict(names))  # noqa: S307 - our own records
    except NameError as err:
        raise KeyError(f"claim {claim.text!r}: {err} (known: {sorted(names)})") from None


def _render(template: str, names: Mapping, claim: Claim) -> str:
    return _evaluate("f" + repr(template), names, claim)


def _paper_numbers(claim: Claim) -> dict:
    def look(ref):
        return paper_value(*ref) if isinstance(ref[0], str) else [paper_value(*r) for r in ref]
    return {name: look(ref) for name, ref in claim.numbers.items()}


def _needed(expression: str | None) -> tuple[str, ...]:
    return compile(expression, "<rule>", "eval").co_names if expression else ()


def judge(claims: tuple[Claim, ...], measures: Mapping) -> pd.DataFrame:
    """The verdict table: one row per claim, with the paper's numbers, ours, the rule and the verdict."""
    rows = []
    for claim in claims:
        needed = list(dict.fromkeys(n for n in _needed(claim.reproduced) + _needed(claim.partly)
                                    if n not in _FUNCTIONS))
        missing = [n for n in needed if n not in measures]
        if missing:
            raise KeyError(f"claim {claim.text!r} needs measures {missing} (known: {sorted(measures)})")
        unmeasured = [n for n in needed if isinstance(measures[n], float) and np.isnan(measures[n])]
        if unmeasured:
            verdict, ours = NOT_MEASURED, f"missing: {', '.join(unmeasured)}"
        else:
            reproduced = bool(_evaluate(claim.reproduced, measures, claim))
            partly = bool(claim.partly) and bool(_evaluate(claim.partly, measures, claim))
            verdict = REPRODUCED if reproduced else PARTLY if partly else NOT_REPRODUCED
            ours = _render(claim.ours, measures, claim)
        rows.append({"claim": claim.text, "source": claim.source,
                     "paper": _render(claim.paper, _paper_numbers(claim), claim), "ours": ours,
                     "rule": claim.rule, "verdict": verdict, "section": claim.section})
    return pd.DataFrame(rows, columns=["claim", "source", "paper", "ours", "rule", "verdict", "section"])


def result_measures(results: pd.DataFrame, methods: Mapping[str, str],
                    metrics: Mapping[str, tuple[str, str, str]], percent: bool = True) -> dict[str, float]:
    """``{f"{metric}_{method}": value}`` for every method (name in the rules -> label in ``results``)
    and metric (name -> (task, column, split)); in points when ``percent``, NaN where absent."""
    scale = 100 if percent else 1
    return {f"{metric}_{name}": scale * result_value(results, label, task, column, split)
            for name, label in methods.items() for metric, (task, column, split) in metrics.items()}


# --------------------------------------------------------------------------------------------
# Chapter 02: representational collapse and the bag-of-concepts analyses

def _collapse(row: str, column: str, table: str) -> PaperRef:
    return ("LCSE", table, row, column)


COLLAPSE_CLAIMS = (
    Claim("D_LCD rises through the middle layers, then falls (representational collapse)",
          "PeakPatch sec. 3.2, Fig. 2", "peak at l_p = {l_p:.0f} of 12 (ViT-B/32)",
          "shape: {lcd_shape}; peak at layer {l_p} of {n_layers}",
          "lcd_shape == 'rise-and-fall'", "lcd_shape == 'rising'",
          {"l_p": ("PeakPatch", "Table 14", "CLIP ViT-B/32", "ECN input layers")}, section="ch02-lcd"),
    Claim("Training overwrites the affirmative/negated distinction most in the final layers",
          "PeakPatch sec. 3.2 (measured against the untrained encoder)",
          "collapse zone l_p+1..L, where alignment dominates",
          "training retained {100 * retained_peak:.0f}% of the untrained D_LCD at l_p, "
          "{100 * retained_final:.0f}% at layer L (least at layer {retained_min_layer})",
          "retained_min_layer == n_layers and retained_final < retained_peak - 0.05",
          "retained_final < retained_peak", section="ch02-untrained"),
    Claim("Visual alignment A(l) climbs with depth, steeply in the upper-middle layers", "PeakPatch sec. 3.2",
          "A low early, sharp rise in upper-middle layers",
          "A(1) = {alignment_first:.3f}, A(L) = {alignment_final:.3f}; ascent at layer {ascent}",
          "alignment_final > alignment_first and ascent > n_layers / 2", "alignment_final > alignment_first",
          section="ch02-lcd"),
    Claim("Only negation rises and falls; paraphrase stays near zero; random captions rise monotonically",
          "PeakPatch sec. 4.4, Fig. 6", "negation: rise-and-fall; paraphrase ~0; random: rising",
          "negation {lcd_shape}, paraphrase max {paraphrase_max:.3f}, random {random_shape} "
          "(minimal pair: {minimal_shape}, max {minimal_max:.3f} at layer {minimal_peak_layer})",
          "lcd_shape == 'rise-and-fall' and random_shape == 'rising' and paraphrase_max < 0.25 * lcd_max",
          "paraphrase_max < 0.25 * lcd_max", section="ch02-specific"),
    Claim("A linear probe separates negated from affirmative best in the middle layers", "PeakPatch App. 0.D",
          "{first:.1f}% (layer 1) -> {peak:.1f}% (layer {peak_layer:.0f}) -> {last:.1f}% (layer L)",
          "{100 * probe_first_layer:.1f}% -> {100 * probe_peak:.1f}% (layer {probe_peak_layer}) "
          "-> {100 * probe_final_layer:.1f}%",
          "1 < probe_peak_layer < n_layers and probe_peak > max(probe_first_layer, probe_final_layer)",
          "probe_peak > 0.75",
          {"first": ("PeakPatch", "App. 0.D", "CLIP ViT-B/32", "linear probe"),
           "peak": ("PeakPatch", "App. 0.D", "CLIP ViT-B/32", "linear probe peak"),
           "peak_layer": ("PeakPatch", "App. 0.D", "CLIP ViT-B/32", "linear probe peak layer"),
           "last": ("PeakPatch", "App. 0.D", "CLIP ViT-B/32", "linear probe last layer")}, section="ch02-probe"),
    Claim("The encoder detects concepts: 'a X' ranks images with X first", "LCSE sec. 3", "AUC {auc:.2f}",
          "AUC {detection_auc:.2f}", "detection_auc >= 0.75", "detection_auc > 0.55",
          {"auc": _collapse("CLIP ViT-B/32", "detection AUC", "Sec. 3")}, section="ch02-recognised"),
    Claim("'no X' ranks images almost like 'a X'", "LCSE sec. 3", "Spearman rho {rho:.2f}",
          "rho {rho_negation:.2f}", "rho_negation >= 0.8", "rho_negation >= 0.5",
          {"rho": _collapse("CLIP ViT-B/32", "rho a X vs no X", "Sec. 3")}, section="ch02-ranking"),
    Claim("Operators drop out: 'and' -> 'or' moves rankings no more than rewording; only a new concept does",
          "LCSE Fig. 3",
          "rephrase {rephrase:.2f}, swap {swap:.2f}, replacement {replacement:.2f}, unrelated {unrelated:.2f}",
          "rephrase {rho_rephrase:.2f}, swap {rho_operator_swap:.2f}, "
          "replacement {rho_concept_replacement:.2f}, unrelated {rho_unrelated:.2f}",
          "abs(rho_rephrase - rho_operator_swap) <= 0.1 and rho_concept_replacement < rho_operator_swap - 0.2",
          "abs(rho_rephrase - rho_operator_swap) <= 0.1 or rho_concept_replacement < rho_operator_swap - 0.2",
          {k: _collapse("CLIP ViT-B/32", f"rho {c}", "Fig. 3") for k, c in (
              ("rephrase", "rephrase"), ("swap", "operator swap"), ("replacement", "concept replacement"),
              ("unrelated", "unrelated"))}, section="ch02-ranking"),
    Claim("'no X' has inverted polarity: images with X outscore images without", "LCSE Table 1", "AUC {auc:.1f}%",
          "AUC {100 * polarity_auc:.1f}%", "polarity_auc < 0.4", "polarity_auc < 0.5",
          {"auc": _collapse("CLIP", "AUC", "Table 1")}, section="ch02-recognised"),
    Claim("Anti-monotone operators invert: ¬A prefers images with A, ¬A∧¬B never prefers Neither", "LCSE Fig. 2",
          "¬A -> A-present {not_a:.0f}%; ¬A∧¬B -> Neither {nor:.0f}%",
          "¬A -> A-present {100 * quadrant_not_a_prefers_a:.0f}%; ¬A∧¬B -> Neither {100 * quadrant_nor_neither:.0f}%",
          "quadrant_not_a_prefers_a > 0.75 and quadrant_nor_neither <= 0.1",
          "quadrant_not_a_prefers_a > 0.5 or quadrant_nor_neither <= 0.1",
          {"not_a": _collapse("¬A", "A wins", "Fig. 2"), "nor": _collapse("¬A∧¬B", "Neither wins", "Fig. 2")},
          section="ch02-quadrants"),
    Claim("Conjunction scores follow mean(s_A, s_B) more than min(s_A, s_B)", "LCSE sec. 3, Fig. 4",
          "rho {mean:.2f} (mean) vs {min:.2f} (min)", "rho {rho_and_mean:.2f} vs {rho_and_min:.2f}",
          "rho_and_mean > rho_and_min", None,
          {"mean": _collapse("A∧B", "rho with mean", "Sec. 3"), "min": _collapse("A∧B", "rho with min", "Sec. 3")},
          section="ch02-span-residual"),
    Claim("The ¬A residual is correctly aligned and amplifying it recovers polarity", "LCSE sec. 3, Fig. 5",
          "alignment {alignment:.0f}%; holistic {holistic:.0f}% -> ~{amplified:.0f}% amplified",
          "alignment {100 * alignment_not:.0f}%; holistic {100 * holistic_auc_not:.0f}% -> "
          "{100 * amplified_auc_not:.0f}% at lambda={amplification:g}",
          "alignment_not > 0.5 and amplified_auc_not > 0.5", "alignment_not > 0.5",
          {"alignment": _collapse("¬A", "alignment", "Sec. 3"), "holistic": _collapse("¬A", "holistic AUC", "Sec. 3"),
           "amplified": _collapse("¬A", "amplified AUC", "Sec. 3")}, section="ch02-span-residual"),
    Claim("The ¬A∧¬B residual is misaligned (encodes salience, not absence)", "LCSE sec. 3, App. C.3",
          "alignment {alignment:.0f}%", "alignment {100 * alignment_nor:.0f}%", "alignment_nor < 0.4",
          "alignment_nor < 0.5", {"alignment": _collapse("¬A∧¬B", "alignment", "Sec. 3")},
          section="ch02-span-residual"),
    Claim("Negation is encoded: Delta_X = g('not X') - g('X') is consistent across concepts, correct in polarity",
          "LCSE App. C.1-C.2", "cosine {cosine:.2f} (random {random:.2f}), AUC {auc:.2f}",
          "cosine {delta_cosine:.2f} (random {random_cosine:.2f}), AUC {delta_auc:.2f}",
          "delta_cosine > random_cosine + 0.3 and delta_auc > 0.6",
          "delta_cosine > random_cosine + 0.3 or delta_auc > 0.6",
          {"cosine": _collapse("Delta_X", "pairwise cosine", "App. C.2"),
           "random": _collapse("random directions", "pairwise cosine", "App. C.1"),
           "auc": _collapse("Delta_X", "delta AUC", "App. C.2")}, section="ch02-direction"),
    Claim("Affirmative-dominated training never drives beta_c-(q) below its unmentioned level (no rejection)",
          "KTN sec. 3.2, Theorem 1", "beta_c-(q) >= 0 at best (= 0 for the optimum)",
          "median beta(negated) - beta(control) {dilution_pull:+.3f}; below control in "
          "{100 * dilution_share_below:.0f}% of pairs; survival ratio {survival_ratio:.2f}",
          "dilution_pull >= 0 and dilution_share_below < 0.1", "dilution_pull >= 0", section="ch02-dilution"),
)


def collapse_verdicts(m: Mapping) -> pd.DataFrame:
    """Chapter 02's claims. ``m`` holds the measures ``collapse_measures`` returns."""
    return judge(COLLAPSE_CLAIMS, m)


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
        "rho_and_mean": float(by_op.loc["A∧B", "rho with mean"]),
        "rho_and_min": float(by_op.loc["A∧B", "rho with min"]),
        # the paper's 0.51-0.53 is the range of per-operator means over the two-concept operators
        "span_weight_low": float(by_op["span weight A"].dropna().min()),
        "span_weight_high": float(by_op["span weight A"].dropna().max()),
        "null_percentile_not": float(null["percentile"].mean()), "null_z_not": float(null["z"].mean()),
        "holistic_auc_not": float(by_op.loc["¬A", "holistic AUC"]),
        "alignment_not": float(by_op.loc["¬A", "alignment"]),
        "amplified_auc_not": float(by_op.loc["¬A", f"AUC at lambda={amplification:g}"]),
        "amplification": amplification, "alignment_nor": float(by_op.loc["¬A∧¬B", "alignment"]),
        "delta_norm": delta_summary["mean norm"], "delta_cosine": delta_summary["pairwise cosine"],
        "random_cosine": delta_summary["random pairwise cosine"], "delta_auc": delta_summary["mean delta AUC"],
        "dilution_pull": dilution["median negated - control"],
        "dilution_share_below": dilution["share negated below control"],
        "survival_ratio": dilution["median survival ratio"],
        "beta_negated": dilution["median beta_c- negated"],
    }


# --------------------------------------------------------------------------------------------
# Chapter 04: Know-Thy-Not

def _ktn(row: str, column: str, table: str = "Table 1") -> PaperRef:
    rows = {"vanilla": "CLIP (ViT-B/32 LAION-2B)", "ec": "EC (ViT-B/32)", "ktn": "KTN (ViT-B/32)",
            "proj": "+ Proj (Dim 1)", "ktn_dims": "+ Ours (Dim 1+2)"}
    return ("KTN", table, rows[row], column)


KTN_CLAIMS = (
    Claim("KTN raises COCO-Confusion 2C mAP well above the vanilla model", "KTN Table 1",
          "{vanilla:.1f} -> {ktn:.1f} (ViT-B/32)", "{conf2c_vanilla:.1f} -> {conf2c_ktn:.1f}",
          "conf2c_ktn - conf2c_vanilla >= 5", "conf2c_ktn > conf2c_vanilla",
          {"vanilla": _ktn("vanilla", "Conf-2C mAP"), "ktn": _ktn("ktn", "Conf-2C mAP")}, section="ch04-table1"),
    Claim("Rejection beats dilution: KTN above Embedding Correction on 2C and 3C", "KTN Table 1, sec. 5.3",
          "2C {ktn2:.1f} vs {ec2:.1f}, 3C {ktn3:.1f} vs {ec3:.1f}",
          "2C {conf2c_ktn:.1f} vs {conf2c_ec:.1f}, 3C {conf3c_ktn:.1f} vs {conf3c_ec:.1f}",
          "conf2c_ktn > conf2c_ec and conf3c_ktn > conf3c_ec", "conf2c_ktn > conf2c_ec or conf3c_ktn > conf3c_ec",
          {"ktn2": _ktn("ktn", "Conf-2C mAP"), "ec2": _ktn("ec", "Conf-2C mAP"),
           "ktn3": _ktn("ktn", "Conf-3C mAP"), "ec3": _ktn("ec", "Conf-3C mAP")}, section="ch04-table1"),
    Claim("KTN improves NegBench MCQ over Embedding Correction", "KTN Table 1",
          "COCO {ktn_coco:.1f} vs {ec_coco:.1f}, VOC {ktn_voc:.1f} vs {ec_voc:.1f}",
          "val {mcq_ktn:.1f} vs {mcq_ec:.1f}, ood {mcq_ood_ktn:.1f} vs {mcq_ood_ec:.1f}",
          "mcq_ktn > mcq_ec and mcq_ood_ktn > mcq_ood_ec", "mcq_ktn > mcq_ec or mcq_ood_ktn > mcq_ood_ec",
          {"ktn_coco": _ktn("ktn", "MCQ COCO"), "ec_coco": _ktn("ec", "MCQ COCO"),
           "ktn_voc": _ktn("ktn", "MCQ VOC2007"), "ec_voc": _ktn("ec", "MCQ VOC2007")}, section="ch04-table1"),
    Claim("Standard retrieval is preserved and negated retrieval improves", "KTN Table 1, sec. 5.3",
          "R@5 {r5_vanilla:.1f} -> {r5_ktn:.1f}; R-Neg@5 {rneg_vanilla:.1f} -> {rneg_ktn:.1f}",
          "R@5 {r5_vanilla:.1f} -> {r5_ktn:.1f}; R-Neg@5 {rneg5_vanilla:.1f} -> {rneg5_ktn:.1f}",
          "abs(r5_ktn - r5_vanilla) <= 0.5 and rneg5_ktn > rneg5_vanilla", "abs(r5_ktn - r5_vanilla) <= 0.5",
          {"r5_vanilla": _ktn("vanilla", "Retrieval COCO R@5"), "r5_ktn": _ktn("ktn", "Retrieval COCO R@5"),
           "rneg_vanilla": _ktn("vanilla", "Retrieval COCO R-Neg@5"),
           "rneg_ktn": _ktn("ktn", "Retrieval COCO R-Neg@5")}, section="ch04-table1"),
    Claim("The image-side rejection dimension adds to projection on MCQ and Confusion", "KTN Table 3",
          "MCQ {mcq_proj:.1f} -> {mcq_ktn:.1f}, Conf-2C {c2_proj:.1f} -> {c2_ktn:.1f} (SigLIP2 SO400M)",
          "MCQ {mcq_proj:.1f} -> {mcq_ktn:.1f}, Conf-2C {conf2c_proj:.1f} -> {conf2c_ktn:.1f}",
          "mcq_ktn - mcq_proj >= 1 and conf2c_ktn - conf2c_proj >= 1",
          "mcq_ktn - mcq_proj >= 1 or conf2c_ktn - conf2c_proj >= 1",
          {"mcq_proj": _ktn("proj", "COCO MCQ", "Table 3"), "mcq_ktn": _ktn("ktn_dims", "COCO MCQ", "Table 3"),
           "c2_proj": _ktn("proj", "Conf-2C", "Table 3"), "c2_ktn": _ktn("ktn_dims", "Conf-2C", "Table 3")},
          section="ch04-ablation"),
    Claim("Vanilla text coefficients on the negated concept are positive, so confusing images win",
          "KTN sec. 3.2-3.3, Fig. 3", "beta_c- >= 0; all top-5 confusing",
          "beta_c- > 0 in {100 * share_beta_positive:.0f}% of galleries; confusing above correct in "
          "{100 * share_confusing_on_top:.0f}%",
          "share_beta_positive >= 0.9 and share_confusing_on_top >= 0.5", "share_beta_positive >= 0.9",
          section="ch04-dilution"),
    Claim("Lemma 1: the correct-minus-confusing gap is -alpha_c- beta_c-", "KTN Lemma 1 (linear concept model)",
          "exact under the model",
          "corr(measured, predicted) = {gap_correlation:.2f}, sign agreement {100 * sign_agreement:.0f}%",
          "gap_correlation >= 0.5 and sign_agreement >= 0.8", "sign_agreement > 0.5", section="ch04-single-embedding"),
    Claim("Corollary 1: the in-kind optimum puts no negative weight on c-", "KTN Theorem 1, Corollary 1",
          "beta*_c- = 0",
          "median beta*_c- = {optimum_beta_median:.3f}; negative in {100 * share_optimum_negative:.0f}% of galleries",
          "optimum_beta_median >= 0 and share_optimum_negative <= 0.1", "optimum_beta_median >= 0",
          section="ch04-single-embedding"),
    Claim("No single text vector reaches what rejection reaches", "KTN sec. 3.2 (dilution ceiling)",
          "single-embedding methods plateau below KTN",
          "in-kind optimum AP {optimum_ap:.1f} vs KTN {conf2c_ktn:.1f} on 2C", "optimum_ap < conf2c_ktn",
          section="ch04-single-embedding"),
)

KTN_METRICS = {"conf2c": ("confusion_2c", "mAP", "val"), "conf3c": ("confusion_3c", "mAP", "val"),
               "mcq": ("mcq", "accuracy", "val"), "mcq_ood": ("mcq", "accuracy", "ood"),
               "r5": ("retrieval", "R@5", "val"), "rneg5": ("retrieval_negated", "R@5", "val")}


def ktn_measures(results: pd.DataFrame, lemma: Mapping, labels: Mapping[str, str]) -> dict:
    """Chapter 04's measures: each metric of ``KTN_METRICS`` per method (``labels``: name in the
    rules -> method label in ``results``, for vanilla, ec, ktn and proj), plus ``lemma1_summary``'s."""
    return {**result_measures(results, labels, KTN_METRICS),
            "share_beta_positive": lemma["share beta_c- > 0"],
            "share_confusing_on_top": lemma["share measured gap < 0 (confusing above correct)"],
            "gap_correlation": lemma["corr(measured, predicted)"], "sign_agreement": lemma["sign agreement"],
            "optimum_beta_median": lemma["median beta*_c- (optimum)"],
            "share_optimum_negative": lemma["share beta*_c- < 0"], "optimum_ap": 100 * lemma["mean optimum AP"]}


def ktn_verdicts(results: pd.DataFrame, lemma: Mapping, labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Chapter 04's claims, from its results frame and ``lemma1_summary``."""
    labels = labels or {name: method_label(m) for name, m in
                        (("vanilla", "vanilla"), ("ec", "ec"), ("ktn", "ktn"), ("proj", "ktn_projection"))}
    return judge(KTN_CLAIMS, ktn_measures(results, lemma, labels))


# --------------------------------------------------------------------------------------------
# Chapter 05: LCSE

def _lcse(row: str, column: str, table: str = "Table 2") -> PaperRef:
    return ("LCSE", table, row, column)


_TABLE8 = tuple(_lcse(f"mu={mu}", "not A", "Table 8") for mu in ("0.18", "0.20", "0.22", "0.24", "0.26"))
_TABLE8_BETA = tuple(_lcse(f"beta={b}", "not A", "Table 8") for b in (10, 30, 50, 60))

LCSE_CLAIMS = (
    Claim("LCSE raises FACTOR-Bench operator accuracy far above holistic scoring", "LCSE Table 2",
          "{clip:.1f} -> {lcse:.1f} (CLIP ViT-B/32)", "{factor_vanilla:.1f} -> {factor_lcse:.1f}",
          "factor_lcse - factor_vanilla >= 10", "factor_lcse > factor_vanilla",
          {"clip": _lcse("CLIP", "FACTOR Acc"), "lcse": _lcse("LCSE (CLIP)", "FACTOR Acc")}, section="ch05-table2"),
    Claim("Anti-monotone operators (NOT, NOR, BUT-NOT) gain most", "LCSE Table 5",
          "{clip:.1f} -> {lcse:.1f} ({lcse - clip:+.1f})", "{anti_vanilla:.1f} -> {anti_lcse:.1f}",
          "anti_lcse - anti_vanilla >= 10", "anti_lcse > anti_vanilla",
          {"clip": _lcse("Holistic (CLIP)", "Holistic", "Table 5"), "lcse": _lcse("LCSE (CLIP)", "+LCSE", "Table 5")},
          section="ch05-operators"),
    Claim("Zero-shot retrieval is retained", "LCSE Table 2", "R@5 {clip:.1f} -> {lcse:.1f}, rho = {rho:.3f}",
          "R@5 {retention_r5_holistic:.1f} -> {retention_r5:.1f}, rho = {retention_rho:.3f}",
          "retention_rho >= 0.99 and abs(retention_r5 - retention_r5_holistic) <= 0.5", "retention_rho >= 0.95",
          {"clip": _lcse("CLIP", "Retention COCO R@5"), "lcse": _lcse("LCSE (CLIP)", "Retention COCO R@5"),
           "rho": _lcse("LCSE (CLIP)", "Retention COCO rho")}, section="ch05-table2"),
    Claim("LCSE improves NegBench MCQ", "LCSE Table 2",
          "COCO {clip_coco:.1f} -> {lcse_coco:.1f}, VOC {clip_voc:.1f} -> {lcse_voc:.1f}",
          "val {mcq_vanilla:.1f} -> {mcq_lcse:.1f}, ood {mcq_ood_vanilla:.1f} -> {mcq_ood_lcse:.1f}",
          "mcq_lcse - mcq_vanilla >= 5 and mcq_ood_lcse - mcq_ood_vanilla >= 5",
          "mcq_lcse - mcq_vanilla >= 5 or mcq_ood_lcse - mcq_ood_vanilla >= 5",
          {"clip_coco": _lcse("CLIP", "NegBench COCO MCQ"), "lcse_coco": _lcse("LCSE (CLIP)", "NegBench COCO MCQ"),
           "clip_voc": _lcse("CLIP", "NegBench VOC2007 MCQ"), "lcse_voc": _lcse("LCSE (CLIP)", "NegBench VOC2007 MCQ")},
          section="ch05-table2"),
    Claim("The gain scales with concept-detection quality", "LCSE Table 4",
          "{high[1] - high[0]:+.1f} (AUC > .9) vs {low[1] - low[0]:+.1f} (< .75)", "{strata_gains}",
          "strata_all_positive and strata_high_gains_most", "strata_all_positive or strata_high_gains_most",
          {"high": (_lcse("High (>0.90)", "Holistic", "Table 4"), _lcse("High (>0.90)", "LCSE", "Table 4")),
           "low": (_lcse("Low (<0.75)", "Holistic", "Table 4"), _lcse("Low (<0.75)", "LCSE", "Table 4"))},
          section="ch05-evidence"),
    Claim("mu sets the sign of the negation correction; beta does not move NOT", "LCSE App. A, Table 8",
          "NOT spans {max(mu) - min(mu):.1f} points over mu, {max(beta) - min(beta):.1f} over beta",
          "NOT spans {not_spread_mu:.1f} points over mu, {not_spread_beta:.1f} over beta",
          "not_spread_mu >= 5 and not_spread_beta == 0", "not_spread_beta == 0",
          {"mu": _TABLE8, "beta": _TABLE8_BETA}, section="ch05-calibration-ablation"),
    Claim("Calibrated mu sits near the median similarity of present concepts", "LCSE App. A",
          "mu = {mu:.2f} for CLIP", "fitted mu = {mu:.3f}; median present similarity {median_present_similarity:.3f}",
          "abs(mu - median_present_similarity) <= 0.03", "abs(mu - median_present_similarity) <= 0.06",
          {"mu": _lcse("CLIP", "mu", "App. A")}, section="ch05-calibration"),
    Claim("Nested queries: recursive aggregation beats holistic scoring", "LCSE App. I",
          "{holistic:.1f} -> {lcse:.1f}", "{nested_vanilla:.1f} -> {nested_lcse:.1f}",
          "nested_lcse - nested_vanilla >= 10", "nested_lcse > nested_vanilla",
          {"holistic": _lcse("nested", "Holistic", "App. I"), "lcse": _lcse("nested", "LCSE", "App. I")},
          section="ch05-operators"),
    Claim("Real parses cost almost nothing against oracle parses", "LCSE App. A, Table 6",
          "{oracle:.1f} -> {parser:.1f} ({parser - oracle:+.1f})",
          "{factor_oracle:.1f} (oracle) -> {factor_parser:.1f} (our parser)",
          "abs(factor_oracle - factor_parser) <= 1", "abs(factor_oracle - factor_parser) <= 3",
          {"oracle": _lcse("LCSE (oracle)", "All", "Table 6"), "parser": _lcse("LCSE (LLM)", "All", "Table 6")},
          section="ch05-parser"),
)

LCSE_METRICS = {"factor": ("factor_operator", "accuracy", "val"), "mcq": ("mcq", "accuracy", "val"),
                "mcq_ood": ("mcq", "accuracy", "ood"), "nested": ("factor_nested", "accuracy", "val"),
                **{f"factor_{op.lower().replace('-', '_')}": ("factor_operator", f"accuracy[{op}]", "val")
                   for op in ("NOT", "NEITHER", "BUT-NOT")}}


def lcse_measures(results: pd.DataFrame, strata: pd.DataFrame, ablation: pd.DataFrame, mu: float,
                  median_present_similarity: float, factor_oracle: float, factor_parser: float,
                  labels: Mapping[str, str] | None = None) -> dict:
    """Chapter 05's measures. ``labels``: name in the rules -> method label in ``results`` (vanilla,
    lcse; the registry's by default); ``strata`` is ``evidence_strata`` with a ``gain`` column, ``ablation``
    ``ablation_rows``; FACTOR accuracies in points."""
    labels = labels or {"vanilla": method_label("vanilla"), "lcse": method_label("lcse")}
    m = result_measures(results, labels, LCSE_METRICS)
    for name in labels:
        m[f"anti_{name}"] = float(np.mean([m[f"factor_{op}_{name}"] for op in ("not", "neither", "but_not")]))
    populated = strata[(strata["n"] > 0) & (strata["min concept AUC"] != "Overall")]
    gains = dict(zip(populated["min concept AUC"], populated["gain"]))
    return {**m, "strata_gains": ", ".join(f"{k}: {g:+.1f}" for k, g in gains.items()),
            "strata_all_positive": bool((populated["gain"] > 0).all()),
            "strata_high_gains_most": bool(len(populated) > 1 and populated["gain"].iloc[0] == populated["gain"].max()),
            "not_spread_mu": float(np.ptp(ablation.query("param == 'mu'")["NOT"])),
            "not_spread_beta": float(np.ptp(ablation.query("param == 'beta'")["NOT"])),
            "mu": float(mu), "median_present_similarity": float(median_present_similarity),
            "factor_oracle": float(factor_oracle), "factor_parser": float(factor_parser),
            "retention_r5": 100 * result_value(results, labels["lcse"], "retention", "R@5"),
            "retention_r5_holistic": 100 * result_value(results, labels["vanilla"], "retention", "R@5"),
            "retention_rho": result_value(results, labels["lcse"], "retention", "rho")}


def lcse_verdicts(measures: Mapping) -> pd.DataFrame:
    """Chapter 05's claims; ``measures`` is what ``lcse_measures`` returns."""
    return judge(LCSE_CLAIMS, measures)


# --------------------------------------------------------------------------------------------
# Chapter 03: the trained methods

def _pp(row: str, column: str, table: str = "Table 1") -> PaperRef:
    return ("PeakPatch", table, row, column)


PEAKPATCH_CLAIMS = (
    Claim("Fine-tuning on negation data (NegFull) raises MCQ above the frozen model",
          "NegBench Table 1; PeakPatch Table 1", "{clip:.1f} -> {nf:.1f}", "{mcq_vanilla:.1f} -> {mcq_negfull:.1f}",
          "mcq_negfull - mcq_vanilla >= 5", "mcq_negfull > mcq_vanilla",
          {"clip": _pp("CLIP", "COCO Avg"), "nf": _pp("CLIP + NF", "COCO Avg")}, section="ch03-mcq"),
    Claim("Negative-template accuracy rises far above the frozen model's", "PeakPatch Table 1",
          "Neg {clip:.1f} -> NF {nf:.1f}, PeakPatch {pp:.1f}",
          "Neg {neg_vanilla:.1f} -> NF {neg_negfull:.1f}, PeakPatch {neg_joint:.1f}",
          "min(neg_negfull, neg_joint) - neg_vanilla >= 20", "max(neg_negfull, neg_joint) - neg_vanilla >= 20",
          {"clip": _pp("CLIP", "COCO Neg"), "nf": _pp("CLIP + NF", "COCO Neg"), "pp": _pp("PeakPatch", "COCO Neg")},
          section="ch03-mcq"),
    Claim("PeakPatch (joint) beats encoder fine-tuning on MCQ", "PeakPatch Table 1",
          "{pp:.1f} vs {nf:.1f}", "{mcq_joint:.1f} vs {mcq_negfull:.1f}",
          "mcq_joint - mcq_negfull >= 1", "mcq_joint > mcq_negfull",
          {"pp": _pp("PeakPatch", "COCO Avg"), "nf": _pp("CLIP + NF", "COCO Avg")}, section="ch03-mcq"),
    Claim("The joint model beats both single modules on MCQ", "PeakPatch Table 5",
          "{joint:.1f} vs ECN {ecn:.1f}, SCN {scn:.1f}", "{mcq_joint:.1f} vs ECN {mcq_ecn:.1f}, SCN {mcq_scn:.1f}",
          "mcq_joint > max(mcq_ecn, mcq_scn)", "mcq_joint > min(mcq_ecn, mcq_scn)",
          {"joint": _pp("PeakPatch (joint)", "MCQ Avg", "Table 5"), "ecn": _pp("ECN only", "MCQ Avg", "Table 5"),
           "scn": _pp("SCN only", "MCQ Avg", "Table 5")}, section="ch03-ablations"),
    Claim("PeakPatch keeps standard retrieval", "PeakPatch sec. 3.3 (Inference), sec. 4.4",
          "corrections small on affirmative inputs", "R@5 {r5_vanilla:.1f} -> {r5_joint:.1f}, rho {rho_joint:.3f}",
          "abs(r5_joint - r5_vanilla) <= 2 and rho_joint >= 0.95", "abs(r5_joint - r5_vanilla) <= 2",
          section="ch03-retrieval"),
)

PEAKPATCH_METRICS = {"mcq": ("mcq", "accuracy", "val"), "neg": ("mcq", "negative_accuracy", "val"),
                     "r5": ("retrieval", "R@5", "val")}


def peakpatch_verdicts(results: pd.DataFrame, negfull: str) -> pd.DataFrame:
    """Chapter 03's claims on the trained methods, from the ``negbench`` protocol's results frame;
    ``negfull`` names the NegFull run chosen on held-out data."""
    labels = {"negfull": negfull, **{name: method_label(m) for name, m in (
        ("vanilla", "vanilla"), ("joint", "peakpatch_joint"), ("ecn", "ecn_only"), ("scn", "scn_only"))}}
    measures = {**result_measures(results, labels, PEAKPATCH_METRICS),
                "rho_joint": result_value(results, labels["joint"], "retention", "rho")}
    return judge(PEAKPATCH_CLAIMS, measures)
