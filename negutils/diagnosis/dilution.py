"""KTN sec. 3 on the organism: does a negated mention push the query's text coefficient
beta_c-(q) = f_T(q) . e*_c- below zero (rejection), or leave it where an affirmative mention puts it
(dilution at best)?

For each ordered concept pair (c+, c-) three queries are encoded,

    negated     "A c+ is present but no c-."        (COCO-Confusion's query, KTN App. D)
    affirmed    "A c+ and a c- are present."
    control     "A c+ is present."                  (c- not mentioned: the level of 'zero')

Concept proxies are not orthogonal, so beta of the control is the query's baseline similarity to
c-; Theorem 1's "no gradient toward beta < 0" predicts beta(negated) >= beta(control). The
*survival ratio* (beta_neg - beta_ctrl) / (beta_aff - beta_ctrl) is 1 when the negation word is
ignored, 0 for pure dilution and negative for rejection.
"""
from __future__ import annotations

import itertools
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from ..benchmarks.confusion import query_2c
from ..core.phrasing import capitalise, with_article
from .concepts import concept_embeddings


def affirmed_query(pos: str, neg: str) -> str:
    return f"{capitalise(with_article(pos))} and {with_article(neg)} are present."


def control_query(pos: str) -> str:
    return f"{capitalise(with_article(pos))} is present."


def concept_pairs(concepts: Sequence[str], limit: int | None = None, seed: int = 0) -> list[tuple[str, str]]:
    """Every ordered pair of distinct ``concepts``, or ``limit`` of them drawn at random with ``seed``
    (a profile's size: three queries per pair, so on a real text tower the whole set costs more than
    the rest of the chapter's captions), listed in the order of the whole set."""
    if limit is not None and limit < 1:
        raise ValueError(f"concept_pairs: limit must be at least 1 (or None for every pair); got {limit}")
    pairs = list(itertools.permutations(concepts, 2))
    if limit is None or limit >= len(pairs):
        return pairs
    keep = np.sort(np.random.default_rng(seed).choice(len(pairs), size=limit, replace=False))
    return [pairs[k] for k in keep]


def text_coefficients(encode: Callable[[Sequence[str]], torch.Tensor], concepts: Sequence[str],
                      pairs: Sequence[tuple[str, str]] | None = None) -> pd.DataFrame:
    """beta_c- and beta_c+ of the three queries for every ordered pair (default: all of them)."""
    concepts = list(concepts)
    pairs = list(pairs) if pairs is not None else concept_pairs(concepts)
    unknown = sorted({c for pair in pairs for c in pair} - set(concepts))
    if unknown:
        raise KeyError(f"text_coefficients: pairs name concepts not in the list: {unknown[:5]}")
    e = concept_embeddings(encode, concepts).double()
    index = {c: k for k, c in enumerate(concepts)}
    kinds = {"negated": [query_2c(p, n) for p, n in pairs], "affirmed": [affirmed_query(p, n) for p, n in pairs],
             "control": [control_query(p) for p, _ in pairs]}
    neg_idx = torch.tensor([index[n] for _, n in pairs])
    pos_idx = torch.tensor([index[p] for p, _ in pairs])
    frame = pd.DataFrame(pairs, columns=["c+", "c-"])
    for kind, queries in kinds.items():
        q = encode(queries).double()
        frame[f"beta_c- {kind}"] = (q * e[neg_idx]).sum(dim=1).numpy()
        frame[f"beta_c+ {kind}"] = (q * e[pos_idx]).sum(dim=1).numpy()
    pull_neg = frame["beta_c- negated"] - frame["beta_c- control"]
    pull_aff = frame["beta_c- affirmed"] - frame["beta_c- control"]
    frame["negated - control"] = pull_neg
    frame["affirmed - control"] = pull_aff
    frame["survival ratio"] = np.where(pull_aff.abs() > 1e-9, pull_neg / pull_aff.where(pull_aff.abs() > 1e-9), np.nan)
    return frame


def dilution_summary(coefficients: pd.DataFrame) -> dict:
    """Medians of the measured coefficients and the share of pairs where negation lowered beta_c-."""
    c = coefficients
    return {"pairs": len(c),
            "median beta_c- negated": float(c["beta_c- negated"].median()),
            "median beta_c- affirmed": float(c["beta_c- affirmed"].median()),
            "median beta_c- control": float(c["beta_c- control"].median()),
            "median negated - control": float(c["negated - control"].median()),
            "median affirmed - control": float(c["affirmed - control"].median()),
            "median survival ratio": float(c["survival ratio"].median()),
            "share negated below control": float((c["negated - control"] < 0).mean()),
            "share negated below zero": float((c["beta_c- negated"] < 0).mean())}
