"""LCSE, logic-constrained score editing (LCSE sec. 4, App. A), as a scorer for the shared evaluation.

    p_c     = sigm(beta (s_c - mu))                      concept evidence, calibrated
    p~_c    = 1 - p_c if c is negated else p_c           polarity
    p_logic = M_gamma(p~)  (recursively over nested parses; gamma = -1 AND, 10 OR, 1 otherwise)
    p_soft  = plain mean of the un-flipped p_c over every concept of the parse
    s_LCSE  = s_hol + (1 / beta) (logit p_logic - logit p_soft)

A caption with one affirmed concept, or several under NONE, has p_logic = p_soft, so its score is
exactly holistic. Concept scores s_c use template-ensembled concept embeddings ("a c", "a photo
of a c"). (mu, beta) are fitted by grid search on pairwise operator tests built from the
``pretrain`` split (:func:`fit_calibration`); the paper's values are the defaults for real
backbones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..benchmarks.evaluate import image_index
from ..core.logic import literals
from ..core.stats import sigmoid
from ..diagnosis.concepts import ConceptBank
from .parsed_scorer import ParsedTextScorer

LCSE_TEMPLATES = ("{a_c}", "a photo of {a_c}")
GAMMA = {"AND": -1.0, "OR": 10.0, "SINGLE": 1.0, "NONE": 1.0}
PAPER_CALIBRATION = {"clip": (0.22, 30.0), "siglip2": (0.05, 30.0)}
EPS = 1e-15     # clips only sigmoids saturated beyond float64


@dataclass(frozen=True)
class Calibration:
    mu: float
    beta: float
    source: str = ""


def logit(p):
    p = np.clip(p, EPS, 1 - EPS)
    return np.log(p) - np.log1p(-p)


def power_mean(values: Sequence[np.ndarray], gamma: float) -> np.ndarray:
    """M_gamma over the first axis of ``values`` (probabilities in (0, 1)): gamma = 1 is the
    arithmetic mean, -1 the harmonic mean, large gamma approaches the max."""
    x = np.clip(np.asarray(values, dtype=np.float64), EPS, 1.0)
    if gamma == 0:
        return np.exp(np.log(x).mean(axis=0))
    return np.mean(x ** gamma, axis=0) ** (1.0 / gamma)


def logic_probability(parse: dict, prob: dict[str, np.ndarray]) -> np.ndarray:
    """p_logic of a (possibly nested) parse, given p_c per concept name."""
    gamma = GAMMA[parse["operator"]]
    if "children" in parse:
        return power_mean([logic_probability(child, prob) for child in parse["children"]], gamma)
    flipped = [1.0 - prob[c["name"]] if c["negated"] else prob[c["name"]] for c in parse["concepts"]]
    return power_mean(flipped, gamma)


def lcse_correction(parse: dict, sims: dict[str, np.ndarray], mu: float, beta: float) -> np.ndarray:
    """(1/beta)(logit p_logic - logit p_soft) for the concept similarities ``sims``."""
    prob = {name: sigmoid(beta * (np.asarray(s, dtype=np.float64) - mu)) for name, s in sims.items()}
    p_soft = np.mean([prob[c["name"]] for c in literals(parse)], axis=0)
    return (logit(logic_probability(parse, prob)) - logit(p_soft)) / beta


def closed_form_not(s_a: np.ndarray, mu: float, beta: float) -> np.ndarray:
    """LCSE App. A: the correction for "not A" is -(2/beta) logit(p_A) = -2 (s_A - mu)."""
    return -(2.0 / beta) * logit(sigmoid(beta * (s_a - mu)))


def closed_form_and(s_a: np.ndarray, s_b: np.ndarray, mu: float, beta: float) -> np.ndarray:
    """LCSE App. A: the correction for "A and B" is (1/beta)(logit HM(p_A, p_B) - logit AM(p_A, p_B))."""
    pa, pb = sigmoid(beta * (s_a - mu)), sigmoid(beta * (s_b - mu))
    return (logit(2 * pa * pb / (pa + pb)) - logit((pa + pb) / 2)) / beta


class LcseScorer(ParsedTextScorer):
    """s_LCSE for any caption; ``parses`` maps captions to oracle parses (FACTOR-Bench's), which
    then take precedence over the parser."""

    def __init__(self, image_scorer, encode, calibration: Calibration, name: str = "LCSE",
                 bank: ConceptBank | None = None, parses: dict | None = None):
        super().__init__(image_scorer, encode, name, parses)
        self.calibration = calibration
        self.bank = bank or ConceptBank(encode, LCSE_TEMPLATES)

    def _edit(self, image_features, parse, pool) -> np.ndarray:
        names = list(dict.fromkeys(c["name"] for c in literals(parse.parse)))
        sims = self.bank.similarities(image_features, names).double().numpy()
        return lcse_correction(parse.parse, {n: sims[:, k] for k, n in enumerate(names)},
                               self.calibration.mu, self.calibration.beta)


# ----------------------------------------------------------------------------- calibration

def pairwise_evidence(scorer: LcseScorer, samples: pd.DataFrame, split) -> dict:
    """What a (mu, beta) grid needs, computed once: the holistic score of each sample's image with
    each caption, the parses, and each parse concept's similarity with the image."""

    idx = image_index(split, samples["image_id"].tolist(), "calibration")
    feats = scorer.image_features(split, idx)
    captions = samples[["caption_0", "caption_1"]].values.tolist()
    hol = np.stack([(feats * scorer.text([row[k] for row in captions])).sum(-1).numpy() for k in (0, 1)], axis=1)
    parses = [[scorer.parses([row[k]])[0] for k in (0, 1)] for row in captions]
    names = sorted({c["name"] for pair in parses for p in pair if p.parsed for c in literals(p.parse)})
    sims = scorer.bank.similarities(feats, names).double().numpy()
    column = {n: k for k, n in enumerate(names)}
    return {"holistic": hol, "parses": parses, "sims": sims, "column": column,
            "correct": samples["correct"].to_numpy(), "test": samples["test"].to_numpy()}


def pairwise_accuracy_at(evidence: dict, mu: float, beta: float) -> pd.Series:
    """Accuracy per test (and overall) of LCSE at (mu, beta) on precomputed evidence."""
    scores = evidence["holistic"].copy()
    for q, pair in enumerate(evidence["parses"]):
        for k, parse in enumerate(pair):
            if parse.parsed:
                sims = {c["name"]: evidence["sims"][q, evidence["column"][c["name"]]] for c in literals(parse.parse)}
                scores[q, k] += float(lcse_correction(parse.parse, sims, mu, beta))
    right = pd.Series(scores.argmax(axis=1) == evidence["correct"])
    per_test = right.groupby(evidence["test"]).mean()
    per_test["All"] = per_test.mean()        # the paper's "average LCSE accuracy across all operators"
    return per_test


def holistic_accuracy(evidence: dict) -> pd.Series:
    right = pd.Series(evidence["holistic"].argmax(axis=1) == evidence["correct"])
    per_test = right.groupby(evidence["test"]).mean()
    per_test["All"] = per_test.mean()
    return per_test


def calibration_grid(evidence: dict, mus: Sequence[float], betas: Sequence[float]) -> pd.DataFrame:
    rows = []
    for mu in mus:
        for beta in betas:
            acc = pairwise_accuracy_at(evidence, float(mu), float(beta))
            rows.append({"mu": float(mu), "beta": float(beta), **acc.to_dict()})
    return pd.DataFrame(rows)


def fit_calibration(grid: pd.DataFrame) -> Calibration:
    """The grid point with the best mean operator accuracy; ties go to the smaller beta, then the
    mu nearest the grid's middle (so a flat optimum is not pinned to an edge)."""
    best = grid["All"].max()
    top = grid[np.isclose(grid["All"], best)].copy()
    middle = np.median(grid["mu"].unique())
    top["distance"] = (top["mu"] - middle).abs()
    row = top.sort_values(["beta", "distance"]).iloc[0]
    return Calibration(float(row["mu"]), float(row["beta"]), f"grid search, mean operator accuracy {best:.3f}")


def default_calibration(model_name: str | None) -> Calibration | None:
    """The paper's (mu, beta) for a real backbone family, None for the organism (fit it)."""
    if model_name is None:
        return None
    family = "siglip2" if "siglip2" in model_name.lower().replace("-", "").replace("_", "") else "clip"
    mu, beta = PAPER_CALIBRATION[family]
    return Calibration(mu, beta, f"LCSE paper default for {family}")
