"""LCSE, logic-constrained score editing (LCSE sec. 4, App. A), as a scorer for the shared evaluation.

    p_c     = sigm(beta (s_c - mu))                      concept evidence, calibrated
    p~_c    = 1 - p_c if c is negated else p_c           polarity
    p_logic = M_gamma(p~)  (recursively over nested parses; gamma = -1 AND, 10 OR, 1 otherwise)
    p_soft  = plain mean of the un-flipped p_c over every concept of the parse
    s_LCSE  = s_hol + (1 / beta) (logit p_logic - logit p_soft)

A caption with one affirmed concept, or several under NONE, has p_logic = p_soft, so its score is
exactly holistic. Concept scores s_c use template-ensembled concept embeddings ("a c", "a photo
of a c"). (mu, beta) are fitted by grid search on pairwise operator tests built from the
``pretrain`` split (:func:`fit_calibration`); the paper's values are the defaults for the backbones
it calibrated (:func:`default_calibration`), and any other backbone is fitted or given its values.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..benchmarks.evaluate import image_index
from ..core.logic import literals
from ..core.metrics import choice_credit
from ..core.stats import sigmoid
from ..diagnosis.concepts import ConceptBank
from .parsed_scorer import EditPlan, Fold, ParsedTextScorer

LCSE_TEMPLATES = ("{a_c}", "a photo of {a_c}")
GAMMA = {"AND": -1.0, "OR": 10.0, "SINGLE": 1.0, "NONE": 1.0}
# LCSE App. A, "Empirical calibration": "This yields (mu=0.22, beta=30) for CLIP and (mu=0.05, beta=30) for
# SigLIP 2"; sec. 5: "All methods use ViT-B/32", CLIP being OpenAI's (NegCLIP and the other CLIP-family
# fine-tunes of sec. 5 share that architecture). The SigLIP 2 size is not given, so every SigLIP 2 takes its values.
PAPER_CALIBRATION = {"clip": (0.22, 30.0), "siglip2": (0.05, 30.0)}
CLIP_CONFIGS = ("ViT-B-32", "ViT-B-32-quickgelu")      # open_clip's configs of CLIP ViT-B/32
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

    def _edit_plan(self, parse):
        """Captions with the same operator tree and negation flags share a shape; the concepts fill
        its slots. One affirmed concept under an operator of gamma = 1 is skipped: its correction
        is exactly zero."""
        concepts = literals(parse.parse)
        if len(concepts) == 1 and not concepts[0]["negated"] and GAMMA[parse.parse["operator"]] == 1.0:
            return None
        names = tuple(dict.fromkeys(c["name"] for c in concepts))
        slot = {n: str(k) for k, n in enumerate(names)}
        return EditPlan(json.dumps(_renamed(parse.parse, slot), sort_keys=True), names)

    def _edit_values(self, shape, slots, pool):
        return lcse_correction(json.loads(shape), {str(k): s for k, s in enumerate(slots)},
                               self.calibration.mu, self.calibration.beta)

    def _fold(self, plan, image_features, pool):
        """"not A" (one negated literal): -2 (s_A - mu) = image . (-2 e_A) + 2 mu, a ``Fold``, where the
        closed form holds on this gallery (the same range test as ``_block_edit``)."""
        if _flat_literals(plan.shape) != ((0, True),):
            return None
        if self._saturates(self.bank.columns(image_features, plan.concepts)):
            return None
        return Fold(vector=-2.0 * self.bank.vectors(plan.concepts)[0].float(), constant=2.0 * self.calibration.mu)

    def _saturates(self, columns) -> bool:
        """Whether some |beta (s - mu)| on these bank columns exceeds Z_EXACT, where the closed
        forms leave the float64 expression's precision."""
        mu, beta = self.calibration.mu, self.calibration.beta
        low, high = self.bank.column_range(columns)
        return max(beta * (high.max() - mu), beta * (mu - low.min())) > Z_EXACT

    def _edit_settings(self):
        return self.calibration

    def _block_edit(self, shape, slot_columns, pool):
        """Flat parses under AND (or with one literal) in closed form, in float32. With
        z_j = beta (s_j - mu), e_j = exp(-z_j), p_j = 1 / (1 + e_j), q_j = e_j p_j, and u_j = e_j for
        an affirmed literal, 1 / e_j for a negated one, the harmonic mean gives logit p_logic =
        -log(mean u) and so beta * correction = log(L sum q / (sum u sum p)); one negated literal
        is -2 z / beta. Where some |z| > Z_EXACT on these columns (the float64 sigmoids approach
        their clip) the float64 expression is taken, so the scores equal it to 1e-6 (tested)."""
        literals_ = _flat_literals(shape)
        mu, beta = self.calibration.mu, self.calibration.beta
        if literals_ is None or self._saturates(slot_columns.unique().numpy()):
            return super()._block_edit(shape, slot_columns, pool)

        def edit(rows: torch.Tensor) -> torch.Tensor:
            z = [rows.index_select(1, slot_columns[:, k]).sub_(mu).mul_(beta) for k in range(slot_columns.shape[1])]
            if len(literals_) == 1:
                return z[literals_[0][0]].mul_(-2.0 / beta)
            sum_p = sum_q = sum_u = 0
            for slot, negated in literals_:
                e = torch.exp(-z[slot])
                p = e.add(1.0).reciprocal_()
                sum_p, sum_q = p + sum_p, e * p + sum_q
                sum_u = (e.reciprocal() if negated else e) + sum_u
            return sum_q.mul_(len(literals_)).div_(sum_u.mul_(sum_p)).log_().div_(beta)
        return edit


Z_EXACT = 20.0      # |beta (s - mu)| up to which float64's 1 - sigm(z) keeps 1e-8 relative precision


@lru_cache(maxsize=None)
def _flat_literals(shape: str) -> tuple[tuple[int, bool], ...] | None:
    """(slot, negated) of each literal of a flat parse shape the closed form covers (AND, or any
    operator with one negated literal); None otherwise."""
    parse = json.loads(shape)
    if "children" in parse:
        return None
    literals_ = tuple((int(c["name"]), bool(c["negated"])) for c in parse["concepts"])
    if len(literals_) == 1 and literals_[0][1]:
        return literals_
    return literals_ if parse["operator"] == "AND" else None


def _renamed(parse: dict, names: dict[str, str]) -> dict:
    """The parse with every concept name replaced by ``names[name]``."""
    if "children" in parse:
        return {"operator": parse["operator"], "children": [_renamed(c, names) for c in parse["children"]]}
    return {"operator": parse["operator"],
            "concepts": [{"name": names[c["name"]], "negated": c["negated"]} for c in parse["concepts"]]}


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
    right = pd.Series(choice_credit(scores, evidence["correct"]))       # a tie earns 1/2
    per_test = right.groupby(evidence["test"]).mean()
    per_test["All"] = per_test.mean()        # the paper's "average LCSE accuracy across all operators"
    return per_test


def holistic_accuracy(evidence: dict) -> pd.Series:
    right = pd.Series(choice_credit(evidence["holistic"], evidence["correct"]))
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


def paper_family(model_name: str) -> str | None:
    """The family of ``PAPER_CALIBRATION`` whose (mu, beta) the LCSE paper calibrated for this open_clip
    config (a family's own name is itself): "clip" for CLIP ViT-B/32's configs, "siglip2" for a
    config naming SigLIP 2; None for any other (SigLIP, SO400M SigLIP, EVA, CLIP at another size...)
    and for the book's own configs (``negbook-*``), whose weights are not the paper's. The config name
    cannot tell whose weights a ViT-B-32 holds: the paper's values assume OpenAI's or a fine-tune of them."""
    if model_name in PAPER_CALIBRATION:
        return model_name
    if model_name.startswith("negbook-"):
        return None
    if "siglip2" in model_name.lower():        # dashes kept: "SigLIP-256" is SigLIP at 256 px
        return "siglip2"
    return "clip" if model_name in CLIP_CONFIGS else None


def default_calibration(model_name: str | None) -> Calibration | None:
    """The paper's (mu, beta) for a model of a family it calibrated (:func:`paper_family`); None for
    any other model and for no name, whose (mu, beta) must be fitted or given."""
    family = None if model_name is None else paper_family(model_name)
    if family is None:
        return None
    mu, beta = PAPER_CALIBRATION[family]
    return Calibration(mu, beta, f"LCSE paper default for {family}")
