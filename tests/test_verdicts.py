"""Chapter 04's and 05's verdicts on constructed results with known answers.

Results frames are built the way the library builds them (``result_row`` / ``results_frame``, one
row per method, task and split). A base case reproduces every claim; each variant changes the
numbers that only one claim reads, so exactly that claim's verdict must move, to the value its
printed rule gives.
"""
import numpy as np
import pandas as pd
import pytest

from negutils.benchmarks import results_frame
from negutils.benchmarks.evaluate import result_row
from negutils.report import ktn_verdicts, lcse_measures, lcse_verdicts
from negutils.report.verdicts import NOT_REPRODUCED, PARTLY, REPRODUCED

R, P, N = REPRODUCED, PARTLY, NOT_REPRODUCED


def frame(values: dict):
    """{(method, task, split): {metric: value}} -> a results frame as ``evaluate_methods`` writes it."""
    return results_frame([result_row("embedded", split, "negbook-tiny", "test", task, {"method": method, **metrics})
                          for (method, task, split), metrics in values.items()])


def verdict_of(table, keyword: str) -> str:
    rows = table[table["claim"].str.contains(keyword, regex=False)]
    assert len(rows) == 1, f"{len(rows)} claims mention {keyword!r}: {list(table['claim'])}"
    return rows["verdict"].iloc[0]


def changed(base, other) -> dict:
    """claim -> verdict for the claims whose verdict differs between two verdict tables."""
    assert list(base["claim"]) == list(other["claim"])
    return {c: v for c, v, w in zip(other["claim"], other["verdict"], base["verdict"]) if v != w}


# --------------------------------------------------------------------------------------- KTN (ch. 04)

KTN_BASE = {
    ("vanilla", "confusion_2c", "val"): {"mAP": 0.60}, ("EC", "confusion_2c", "val"): {"mAP": 0.70},
    ("KTN", "confusion_2c", "val"): {"mAP": 0.80}, ("KTN (projection only)", "confusion_2c", "val"): {"mAP": 0.75},
    ("vanilla", "confusion_3c", "val"): {"mAP": 0.55}, ("EC", "confusion_3c", "val"): {"mAP": 0.60},
    ("KTN", "confusion_3c", "val"): {"mAP": 0.70},
    **{(m, "mcq", s): {"accuracy": a} for m, a in (("vanilla", 0.40), ("EC", 0.50), ("KTN", 0.60),
                                                    ("KTN (projection only)", 0.55)) for s in ("val", "ood")},
    ("vanilla", "retrieval", "val"): {"R@5": 0.65}, ("KTN", "retrieval", "val"): {"R@5": 0.65},
    ("vanilla", "retrieval_negated", "val"): {"R@5": 0.50}, ("EC", "retrieval_negated", "val"): {"R@5": 0.52},
    ("KTN", "retrieval_negated", "val"): {"R@5": 0.55},
}
LEMMA_BASE = {"galleries": 20, "share beta_c- > 0": 1.0, "share measured gap < 0 (confusing above correct)": 0.8,
              "corr(measured, predicted)": 0.9, "sign agreement": 0.9, "median beta*_c- (optimum)": 0.0,
              "share beta*_c- < 0": 0.0, "mean optimum AP": 0.70, "mean vanilla AP": 0.60}
KTN_CLAIMS = {"2C": "COCO-Confusion 2C mAP well above", "rejection": "Rejection beats dilution",
              "mcq": "improves NegBench MCQ", "retrieval": "Standard retrieval is preserved",
              "dimension": "image-side rejection dimension", "coefficients": "Vanilla text coefficients",
              "lemma": "Lemma 1", "corollary": "Corollary 1", "ceiling": "No single text vector"}


def overridden(base, results):
    """A copy of ``base`` ((method, task, split) -> metrics) with ``results``' metrics laid over it."""
    values = {k: dict(v) for k, v in base.items()}
    for key, metrics in (results or {}).items():
        values[key].update(metrics)
    return values


def ktn_case(results=None, lemma=None):
    values = overridden(KTN_BASE, results)
    return ktn_verdicts(frame(values), {**LEMMA_BASE, **(lemma or {})})


def test_ktn_base_case_reproduces_every_claim():
    table = ktn_case()
    assert len(table) == len(KTN_CLAIMS)
    assert {name: verdict_of(table, k) for name, k in KTN_CLAIMS.items()} == dict.fromkeys(KTN_CLAIMS, R)
    assert table["rule"].str.startswith("reproduced:").all()


@pytest.mark.parametrize("claim, results, lemma, verdict", [
    # KTN 2C - vanilla 2C: +3 points is a gain below +5, -5 points none
    ("2C", {("vanilla", "confusion_2c", "val"): {"mAP": 0.77}}, None, P),
    ("2C", {("vanilla", "confusion_2c", "val"): {"mAP": 0.85}}, None, N),
    # KTN above EC on 2C only, then on neither
    ("rejection", {("EC", "confusion_3c", "val"): {"mAP": 0.75}}, None, P),
    ("rejection", {("EC", "confusion_3c", "val"): {"mAP": 0.75},
                   ("EC", "confusion_2c", "val"): {"mAP": 0.85}}, None, N),
    # KTN above EC on val MCQ only, then on neither
    ("mcq", {("EC", "mcq", "ood"): {"accuracy": 0.65}}, None, P),
    ("mcq", {("EC", "mcq", "ood"): {"accuracy": 0.65}, ("EC", "mcq", "val"): {"accuracy": 0.65}}, None, N),
    # R@5 kept but R-Neg@5 down; R@5 moved by 5 points
    ("retrieval", {("KTN", "retrieval_negated", "val"): {"R@5": 0.45}}, None, P),
    ("retrieval", {("vanilla", "retrieval", "val"): {"R@5": 0.70}}, None, N),
    # rejection dimension: +0.5 on MCQ (below 1) but +5 on 2C; then neither
    ("dimension", {("KTN (projection only)", "mcq", "val"): {"accuracy": 0.595}}, None, P),
    ("dimension", {("KTN (projection only)", "mcq", "val"): {"accuracy": 0.60},
                   ("KTN (projection only)", "confusion_2c", "val"): {"mAP": 0.80}}, None, N),
    ("coefficients", None, {"share measured gap < 0 (confusing above correct)": 0.3}, P),
    ("coefficients", None, {"share beta_c- > 0": 0.5}, N),
    ("coefficients", None, {"share beta_c- > 0": 0.9, "share measured gap < 0 (confusing above correct)": 0.5}, R),
    ("lemma", None, {"corr(measured, predicted)": 0.2}, P),
    ("lemma", None, {"sign agreement": 0.8}, R),          # the rule's thresholds are inclusive
    ("lemma", None, {"sign agreement": 0.5}, N),          # "partly" needs more than half
    ("corollary", None, {"share beta*_c- < 0": 0.3}, P),
    ("corollary", None, {"median beta*_c- (optimum)": -0.01}, N),
    ("ceiling", None, {"mean optimum AP": 0.85}, N),      # 85 > KTN's 80 on 2C
])
def test_ktn_each_claim_follows_its_rule(claim, results, lemma, verdict):
    base, table = ktn_case(), ktn_case(results, lemma)
    assert verdict_of(table, KTN_CLAIMS[claim]) == verdict
    expected = {} if verdict == R else {table["claim"][table["claim"].str.contains(KTN_CLAIMS[claim])].iloc[0]: verdict}
    assert changed(base, table) == expected       # no other claim reads these numbers


def test_ktn_claims_read_the_val_split_only_where_their_rules_say():
    # the same numbers on an ood split change nothing unless the claim compares ood
    table = ktn_case({("KTN", "mcq", "ood"): {"accuracy": 0.45}})
    assert verdict_of(table, KTN_CLAIMS["mcq"]) == P               # ood KTN 45 < EC 50: val only
    assert verdict_of(table, KTN_CLAIMS["dimension"]) == R         # the ablation reads val MCQ
    assert "ood 45.0 vs 50.0" in table.loc[table["claim"].str.contains(KTN_CLAIMS["mcq"]), "ours"].iloc[0]


def test_ktn_verdicts_name_other_methods():
    values = {(m.replace("KTN", "KTN-B") if m.startswith("KTN") else m, t, s): v for (m, t, s), v in KTN_BASE.items()}
    values[("KTN", "confusion_2c", "val")] = {"mAP": 0.10}        # a decoy under the default name
    table = ktn_verdicts(frame(values), LEMMA_BASE, labels={"vanilla": "vanilla", "ec": "EC", "ktn": "KTN-B",
                                                            "proj": "KTN-B (projection only)"})
    assert (table["verdict"] == R).all()


# -------------------------------------------------------------------------------------- LCSE (ch. 05)

OPERATORS = ("NOT", "NEITHER", "BUT-NOT", "AND", "OR")
LCSE_BASE = {
    ("vanilla", "factor_operator", "val"): {"accuracy": 0.58, **{f"accuracy[{t}]": 0.55 for t in OPERATORS}},
    ("LCSE", "factor_operator", "val"): {"accuracy": 0.85, **{f"accuracy[{t}]": 0.80 for t in OPERATORS}},
    ("vanilla", "mcq", "val"): {"accuracy": 0.39}, ("LCSE", "mcq", "val"): {"accuracy": 0.60},
    ("vanilla", "mcq", "ood"): {"accuracy": 0.38}, ("LCSE", "mcq", "ood"): {"accuracy": 0.73},
    ("vanilla", "factor_nested", "val"): {"accuracy": 0.51}, ("LCSE", "factor_nested", "val"): {"accuracy": 0.80},
}
MEASURES_BASE = {"retention R@5": 0.552, "retention R@5 holistic": 0.553, "retention rho": 0.999,
                 "strata all positive": True,
                 "strata high gains most": True, "NOT spread over mu": 30.0, "NOT spread over beta": 0.0,
                 "mu": 0.22, "median present similarity": 0.23, "factor oracle": 85.5, "factor parser": 85.2}
LCSE_CLAIMS = {"factor": "FACTOR-Bench operator accuracy", "anti": "Anti-monotone operators",
               "retention": "retrieval is retained", "mcq": "LCSE improves NegBench MCQ",
               "strata": "concept-detection quality", "calibration": "mu sets the sign",
               "mu": "Calibrated mu", "nested": "Nested queries", "parser": "Real parses"}


def lcse_case(results=None, measures=None):
    values = overridden(LCSE_BASE, results)
    m = {**MEASURES_BASE, **(measures or {})}
    values[("LCSE", "retention", "val")] = {"R@5": m["retention R@5"], "rho": m["retention rho"]}
    values[("vanilla", "retention", "val")] = {"R@5": m["retention R@5 holistic"], "rho": 1.0}
    # evidence strata whose gains make each flag true or false (High first, as evidence_strata orders them)
    high, low = {(True, True): (30.0, 20.0), (True, False): (10.0, 20.0), (False, True): (30.0, -5.0),
                 (False, False): (-5.0, 20.0)}[(m["strata all positive"], m["strata high gains most"])]
    strata = pd.DataFrame({"min concept AUC": ["High (>0.90)", "Low (<0.75)", "Overall"], "n": [10, 10, 20],
                           "gain": [high, low, (high + low) / 2]})
    ablation = pd.DataFrame({"param": ["mu", "mu", "beta", "beta"],
                             "NOT": [50.0, 50.0 + m["NOT spread over mu"], 88.0, 88.0 + m["NOT spread over beta"]]})
    return lcse_verdicts(lcse_measures(frame(values), strata, ablation, m["mu"], m["median present similarity"],
                                       m["factor oracle"], m["factor parser"]))


def test_lcse_base_case_reproduces_every_claim():
    table = lcse_case()
    assert len(table) == len(LCSE_CLAIMS)
    assert {name: verdict_of(table, k) for name, k in LCSE_CLAIMS.items()} == dict.fromkeys(LCSE_CLAIMS, R)


def _anti(value):
    return {f"accuracy[{t}]": value for t in ("NOT", "NEITHER", "BUT-NOT")}


@pytest.mark.parametrize("claim, results, measures, verdict", [
    ("factor", {("LCSE", "factor_operator", "val"): {"accuracy": 0.63}}, None, P),        # +5 < +10
    ("factor", {("LCSE", "factor_operator", "val"): {"accuracy": 0.50}}, None, N),
    # the anti-monotone mean reads NOT, NEITHER and BUT-NOT only: AND and OR do not count
    ("anti", {("LCSE", "factor_operator", "val"): _anti(0.60)}, None, P),
    ("anti", {("LCSE", "factor_operator", "val"): {**_anti(0.50), "accuracy[AND]": 0.99}}, None, N),
    ("anti", {("vanilla", "factor_operator", "val"): {"accuracy[AND]": 0.99, "accuracy[OR]": 0.99}}, None, R),
    ("retention", None, {"retention rho": 0.97}, P),
    ("retention", None, {"retention R@5": 0.54}, P),           # rho kept, R@5 off by 1.3 points
    ("retention", None, {"retention rho": 0.90}, N),
    ("mcq", {("LCSE", "mcq", "ood"): {"accuracy": 0.40}}, None, P),
    ("mcq", {("LCSE", "mcq", "ood"): {"accuracy": 0.40}, ("LCSE", "mcq", "val"): {"accuracy": 0.41}}, None, N),
    ("strata", None, {"strata high gains most": False}, P),
    ("strata", None, {"strata all positive": False}, P),
    ("strata", None, {"strata all positive": False, "strata high gains most": False}, N),
    ("calibration", None, {"NOT spread over mu": 2.0}, P),
    ("calibration", None, {"NOT spread over beta": 0.5}, N),
    ("mu", None, {"median present similarity": 0.27}, P),     # 0.05 apart
    ("mu", None, {"median present similarity": 0.30}, N),     # 0.08 apart
    ("nested", {("LCSE", "factor_nested", "val"): {"accuracy": 0.55}}, None, P),
    ("nested", {("LCSE", "factor_nested", "val"): {"accuracy": 0.45}}, None, N),
    ("parser", None, {"factor parser": 83.5}, P),
    ("parser", None, {"factor parser": 80.0}, N),
])
def test_lcse_each_claim_follows_its_rule(claim, results, measures, verdict):
    base, table = lcse_case(), lcse_case(results, measures)
    assert verdict_of(table, LCSE_CLAIMS[claim]) == verdict
    expected = ({} if verdict == R
                else {table["claim"][table["claim"].str.contains(LCSE_CLAIMS[claim])].iloc[0]: verdict})
    assert changed(base, table) == expected


def test_lcse_anti_monotone_gain_is_the_mean_over_three_operators():
    # NOT +30, NEITHER -10, BUT-NOT -5 points: mean +5 is a gain but below +10
    lcse = {"accuracy[NOT]": 0.85, "accuracy[NEITHER]": 0.45, "accuracy[BUT-NOT]": 0.50}
    table = lcse_case({("LCSE", "factor_operator", "val"): lcse})
    assert verdict_of(table, LCSE_CLAIMS["anti"]) == P
    ours = table.loc[table["claim"].str.contains(LCSE_CLAIMS["anti"]), "ours"].iloc[0]
    assert ours == f"{55.0:.1f} -> {np.mean([85.0, 45.0, 50.0]):.1f}"
