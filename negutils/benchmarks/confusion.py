"""COCO-Confusion 2C and 3C (KTN sec. 5.1 and App. D) from any COCO-format split.

Every gallery holds only images that contain the affirmed concept(s): *correct* images lack the
negated concept, *confusing* images contain it. A method that merely dilutes c- scores both
groups alike; only rejection separates them. The metric is AP per gallery (correct images are
the positives), macro-averaged over galleries.

2C: every ordered pair (c+, c-) with |I+| >= M_min and |I+-| >= M_min; up to M_max images are
sampled from each group with seed 42; query "A {c+} is present but no {c-}."
3C: every triple with >= M_min images containing all three, split three ways ((a,b),c),
((a,c),b), ((b,c),a); same selection; query "A {c1} and {c2} are present but no {c-}."

On real COCO the paper re-verifies every image with OWLv2 (tau = 0.1, >= 5 verified images per
group); pass ``verifier`` for that. On the embedded world the ground truth is exact, so no
verifier is needed and the report says so.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..core.phrasing import capitalise, with_article
from ..world.coco import CocoSplit

# (image index, concepts) -> {concept: max detection confidence in [0, 1]}
Verifier = Callable[[int, list[str]], dict[str, float]]


@dataclass(frozen=True)
class ConfusionConfig:
    m_min: int = 10                 # paper: 10
    m_max: int = 50                 # paper: 50
    seed: int = 42                  # paper: 42
    verify_threshold: float = 0.1   # OWLv2 tau
    min_verified: int = 5           # images per group that must survive verification


def _holders(split: CocoSplit) -> dict[str, set[int]]:
    """Category -> indices of the images that contain it."""
    return {c: {i for i, objs in enumerate(split.objects) if c in objs} for c in split.categories}


# KTN App. D's queries; {a} is an article phrase, {B} and {N} bare nouns
QUERY_TEMPLATES = {"2C": "{a} is present but no {N}.", "3C": "{a} and {B} are present but no {N}."}


def query_2c(pos: str, neg: str) -> str:
    return capitalise(QUERY_TEMPLATES["2C"].format(a=with_article(pos), N=neg))


def query_3c(pos1: str, pos2: str, neg: str) -> str:
    return capitalise(QUERY_TEMPLATES["3C"].format(a=with_article(pos1), B=pos2, N=neg))


def _verified(indices: list[int], positives: list[str], negative: str, want_negative: bool,
              verifier: Verifier, tau: float) -> list[int]:
    kept = []
    for i in indices:
        scores = verifier(i, positives + [negative])
        if max(scores[c] for c in positives) >= tau and (scores[negative] >= tau) == want_negative:
            kept.append(i)
    return kept


def build_confusion(split: CocoSplit, kind: str = "2C", config: ConfusionConfig = ConfusionConfig(),
                    verifier: Verifier | None = None) -> pd.DataFrame:
    """One row per gallery: query, affirmed concepts, negated concept, and the image ids of its
    correct and confusing images (JSON lists), in a deterministic order."""
    if kind not in ("2C", "3C"):
        raise ValueError(f"COCO-Confusion kind must be '2C' or '3C', got {kind!r}")
    rng = np.random.default_rng(config.seed)
    cats = split.categories
    holders = _holders(split)
    if kind == "2C":
        partitions = [((p,), n) for p, n in itertools.permutations(cats, 2)]
    else:
        partitions = []
        for a, b, c in itertools.combinations(cats, 3):
            if len(holders[a] & holders[b] & holders[c]) >= config.m_min:
                partitions += [((a, b), c), ((a, c), b), ((b, c), a)]
    rows = []
    for positives, negative in partitions:
        with_pos = set.intersection(*(holders[p] for p in positives))
        correct = sorted(with_pos - holders[negative])
        confusing = sorted(with_pos & holders[negative])
        if len(correct) < config.m_min or len(confusing) < config.m_min:
            continue
        correct = sorted(rng.choice(correct, size=min(config.m_max, len(correct)), replace=False).tolist())
        confusing = sorted(rng.choice(confusing, size=min(config.m_max, len(confusing)), replace=False).tolist())
        if verifier is not None:
            correct = _verified(correct, list(positives), negative, False, verifier, config.verify_threshold)
            confusing = _verified(confusing, list(positives), negative, True, verifier, config.verify_threshold)
            if len(correct) < config.min_verified or len(confusing) < config.min_verified:
                continue
        query = query_2c(positives[0], negative) if kind == "2C" else query_3c(*positives, negative)
        rows.append({"kind": kind, "query": query, "positives": json.dumps(list(positives)), "negative": negative,
                     "correct_ids": json.dumps([split.image_ids[i] for i in correct]),
                     "confusing_ids": json.dumps([split.image_ids[i] for i in confusing]),
                     "n_correct": len(correct), "n_confusing": len(confusing)})
    return pd.DataFrame(rows, columns=["kind", "query", "positives", "negative", "correct_ids", "confusing_ids",
                                       "n_correct", "n_confusing"])


def confusing_density(galleries: pd.DataFrame, split: CocoSplit) -> pd.DataFrame:
    """KTN App. D.6: the share of confusing images in each curated gallery against the share of
    images containing every query concept in the standard retrieval gallery (the whole split)."""
    holders = _holders(split)
    rows = []
    for g in galleries.itertuples():
        concepts = json.loads(g.positives) + [g.negative]
        standard = len(set.intersection(*(holders[c] for c in concepts))) / len(split)
        rows.append({"kind": g.kind, "query": g.query, "gallery": g.n_correct + g.n_confusing,
                     "confusing density (curated)": g.n_confusing / (g.n_correct + g.n_confusing),
                     "confusing density (standard retrieval)": standard})
    return pd.DataFrame(rows)


def verification_report(verifier: Verifier | None, dataset: str) -> str:
    if verifier is None and dataset == "embedded":
        return ("embedded world: ground truth is exact (objects are drawn, not annotated), so no detector "
                "verification is needed")
    if verifier is None:
        return ("no detector verification: galleries rest on the annotations alone (the paper re-verifies with "
                "OWLv2, tau=0.1; pass verifier= on a GPU runner)")
    return "every image verified by the supplied detector (tau={:.2f})".format(ConfusionConfig.verify_threshold)
