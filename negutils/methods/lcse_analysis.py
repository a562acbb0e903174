"""LCSE's analyses: the calibration set, the calibration ablation (LCSE Tables 8-9), evidence-quality
stratification (Table 4) and the per-operator table (Table 3)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..benchmarks.factor import FactorConfig, build_factor
from ..core.logic import canonical
from ..core.metrics import roc_auc
from .lcse import (
    Calibration,
    LcseScorer,
    calibration_grid,
    default_calibration,
    fit_calibration,
    pairwise_accuracy_at,
    pairwise_evidence,
)

STRATA = (("High (>0.90)", 0.90, 1.01), ("Medium (0.75-0.90)", 0.75, 0.90), ("Low (<0.75)", -0.01, 0.75))
OPERATOR_ORDER = ("NOT", "NEITHER", "BUT-NOT", "AND", "OR")
PAPER_OPERATOR = {"NOT": "not A", "NEITHER": "not A and not B", "BUT-NOT": "A and not B", "AND": "A and B",
                  "OR": "A or B"}


def calibration_set(split, per_operator: int = 100, seed: int = 1) -> pd.DataFrame:
    """Pairwise operator tests (NOT, AND, OR, BUT-NOT, NEITHER) from ``split``'s annotations, as
    FACTOR-Bench builds them but with another seed: LCSE App. A's held-out calibration data."""
    config = FactorConfig(seed=seed, operator_samples=per_operator, equivalence_samples=(), compound_samples=0,
                          nested_samples=0)
    return build_factor(split, config)


def ablation_rows(grid: pd.DataFrame, mu: float, beta: float) -> pd.DataFrame:
    """LCSE Tables 8-9: mu varied at the chosen beta, then beta varied at the chosen mu."""
    tests = [t for t in OPERATOR_ORDER if t in grid.columns] + ["All"]
    by_mu = grid[np.isclose(grid["beta"], beta)].assign(param="mu", value=lambda f: f["mu"])
    by_beta = grid[np.isclose(grid["mu"], mu)].assign(param="beta", value=lambda f: f["beta"])
    table = pd.concat([by_mu, by_beta])[["param", "value", *tests]]
    table[tests] = (100 * table[tests]).round(1)
    return table.reset_index(drop=True)


def concept_detection_auc(bank, split, image_features, concepts) -> pd.Series:
    """Per concept, the AUC of its image similarity for telling images with it from images without."""
    sims = bank.similarities(image_features, list(concepts)).numpy()
    out = {}
    for k, c in enumerate(concepts):
        labels = np.array([c in objs for objs in split.objects], dtype=float)
        out[c] = roc_auc(labels, sims[:, k]) if 0 < labels.sum() < len(labels) else np.nan
    return pd.Series(out, name="detection AUC")


def evidence_strata(samples: pd.DataFrame, auc: pd.Series, correct: dict[str, np.ndarray]) -> pd.DataFrame:
    """LCSE Table 4: the FACTOR operator split binned by the weakest detection AUC among each
    sample's concepts, with each method's accuracy per bin (``correct``: method -> bool per sample)."""
    weakest = np.array([min(auc[c] for c in json.loads(cs)) for cs in samples["concepts"]])
    rows = []
    for label, lo, hi in STRATA:
        mask = (weakest > lo) & (weakest <= hi) if lo >= 0 else weakest <= hi
        rows.append({"min concept AUC": label, "n": int(mask.sum()),
                     **{m: 100 * float(c[mask].mean()) if mask.any() else np.nan for m, c in correct.items()}})
    rows.append({"min concept AUC": "Overall", "n": len(samples),
                 **{m: 100 * float(c.mean()) for m, c in correct.items()}})
    return pd.DataFrame(rows).round(1)


def operator_table(results: pd.DataFrame) -> pd.DataFrame:
    """LCSE Table 3's layout: accuracy per operator of the FACTOR operator split, per method, in %."""
    op = results[results["task"] == "factor_operator"].set_index("method")
    columns = {f"accuracy[{t}]": PAPER_OPERATOR[t] for t in OPERATOR_ORDER if f"accuracy[{t}]" in op}
    table = 100 * op[list(columns)].rename(columns=columns)
    table["All"] = 100 * op["accuracy"]
    return table.round(1)


def parser_agreement(factor: pd.DataFrame, parses: dict) -> pd.DataFrame:
    """Per FACTOR split, the share of captions whose parse equals the oracle parse (operator,
    concepts and polarity; order-free), and the share left unparsed."""
    rows = []
    for split_name, group in factor.groupby("split", sort=False):
        pairs = list(zip(group["caption_0"], group["parse_0"])) + list(zip(group["caption_1"], group["parse_1"]))
        match = [parses[c].parsed and canonical(parses[c].parse) == canonical(json.loads(o)) for c, o in pairs]
        rows.append({"FACTOR split": split_name, "captions": len(pairs), "match oracle": float(np.mean(match)),
                     "unparsed": float(np.mean([not parses[c].parsed for c, _ in pairs]))})
    return pd.DataFrame(rows)


def oracle_parses(factor: pd.DataFrame) -> dict[str, dict]:
    """caption -> oracle parse, from FACTOR-Bench's embedded parses."""
    out = {}
    for k in (0, 1):
        out.update({c: json.loads(p) for c, p in zip(factor[f"caption_{k}"], factor[f"parse_{k}"])})
    return out


def calibration_evidence(image_scorer, encode, tests: pd.DataFrame, split) -> dict:
    """What a (mu, beta) grid and any single point on it are scored from, computed once: the pairwise
    operator ``tests`` of ``split`` (from :func:`calibration_set`) under holistic scoring and the parses'
    concept similarities (``pairwise_evidence``)."""
    return pairwise_evidence(LcseScorer(image_scorer, encode, Calibration(0.0, 1.0)), tests, split)


def fit_on_evidence(evidence: dict, betas=(10, 20, 30, 40, 50, 60)) -> tuple[Calibration, pd.DataFrame]:
    """(mu, beta) for LCSE and the grid it comes from: the grid maximum over the calibration tests'
    ``evidence``, with mu spanning the 5-95% range of the concept similarities. LCSE App. A fits every
    backbone so, on COCO train2017; :func:`beside_paper` sets the fit beside the paper's values."""
    lo, hi = np.quantile(evidence["sims"], [0.05, 0.95])
    grid = calibration_grid(evidence, np.round(np.linspace(lo, hi, 13), 3), betas)
    return fit_calibration(grid), grid


def fit_on_split(image_scorer, encode, tests: pd.DataFrame, split,
                 betas=(10, 20, 30, 40, 50, 60)) -> tuple[Calibration, pd.DataFrame]:
    """:func:`fit_on_evidence` on the evidence of ``tests`` of ``split`` (:func:`calibration_evidence`)."""
    return fit_on_evidence(calibration_evidence(image_scorer, encode, tests, split), betas)


def beside_paper(evidence: dict, fit: Calibration, model_name: str | None, split_name: str) -> pd.DataFrame:
    """The fitted (mu, beta) and the LCSE paper's values for ``model_name``'s family (CLIP's for the
    organism), each with its accuracy per operator on the same calibration tests (``evidence``, from
    :func:`calibration_evidence` on split ``split_name``); ``used`` marks the fit, which LCSE scores with.
    A model the paper gave no values for has the fit's row only."""
    paper = default_calibration(model_name or "clip")
    rows = [{"calibration": f"fit on {split_name} ({len(evidence['correct'])} tests)", "mu": fit.mu,
             "beta": fit.beta, **pairwise_accuracy_at(evidence, fit.mu, fit.beta).to_dict(), "used": True}]
    if paper is not None:
        rows.append({"calibration": paper.source, "mu": paper.mu, "beta": paper.beta,
                     **pairwise_accuracy_at(evidence, paper.mu, paper.beta).to_dict(), "used": False})
    return pd.DataFrame(rows)
