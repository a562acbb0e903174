"""KTN's derivations checked numerically on a backbone (KTN sec. 3, App. A).

* **Lemma 1** (rejection criterion): for a correct image i+ and a confusing image i+- that differ
  only along c-, s(i+, q) - s(i+-, q) = -alpha_c-(i+-) beta_c-(q). Over a COCO-Confusion gallery
  the analogue compares the measured gap of mean scores, mean s(I+) - mean s(I+-), with the linear
  prediction -beta_c-(q) (mean alpha_c-(I+-) - mean alpha_c-(I+)).
* **Theorem 1 / Corollary 1**: under in-kind alignment the optimal unit text vector is
  beta*(q) = mu(q) / |mu(q)|, mu(q) the mean embedding of images satisfying q. Its c- coordinate
  beta*_c- is what the data can teach; KTN's claim is that it is not negative. We measure it (the
  images that define mu are the split's correct images outside the gallery) and the COCO-Confusion
  AP of that optimal single vector: the ceiling of any method that only edits the text embedding.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ..benchmarks.evaluate import evaluate_confusion, evaluate_pairwise, image_index
from ..core.metrics import average_precision
from .concepts import ConceptBank


def _gallery(split, row) -> tuple[np.ndarray, np.ndarray, list[str], str]:
    correct, confusing = json.loads(row.correct_ids), json.loads(row.confusing_ids)
    idx = image_index(split, correct + confusing, f"gallery {row.query!r}")
    labels = np.r_[np.ones(len(correct)), np.zeros(len(confusing))]
    return idx, labels, json.loads(row.positives), row.negative


def lemma1_check(galleries: pd.DataFrame, split, image_scorer, encode, bank: ConceptBank) -> pd.DataFrame:
    """Per gallery: beta_c-(q), the measured and predicted gap between correct and confusing images,
    the optimal in-kind vector's beta*_c- and its AP, and the vanilla AP."""
    holders = {c: {i for i, objs in enumerate(split.objects) if c in objs} for c in split.categories}
    feats_all = image_scorer.image_features(split, np.arange(len(split))).float()
    rows = []
    for g in galleries.itertuples():
        idx, labels, positives, negative = _gallery(split, g)
        feats = feats_all[idx]
        q = F.normalize(encode([g.query]).float(), dim=-1)[0]
        e_neg = bank.vectors([negative])[0].float()
        alpha = (feats @ e_neg).numpy()
        s = (feats @ q).numpy()
        beta = float(q @ e_neg)
        measured = s[labels == 1].mean() - s[labels == 0].mean()
        predicted = -beta * (alpha[labels == 0].mean() - alpha[labels == 1].mean())
        # in-kind optimum: mean of the split's other images that satisfy the query
        satisfying = set.intersection(*(holders[p] for p in positives)) - holders[negative] - set(idx.tolist())
        row = {"query": g.query, "beta_c-(q)": beta, "measured gap": float(measured),
               "predicted gap": float(predicted), "vanilla AP": average_precision(labels, s),
               "satisfying images": len(satisfying)}
        if satisfying:
            mu = feats_all[sorted(satisfying)].mean(0)
            optimum = F.normalize(mu, dim=0)
            row["beta*_c- (optimum)"] = float(optimum @ e_neg)
            row["beta*_c+ (optimum)"] = float(np.mean([float(optimum @ bank.vectors([p])[0].float())
                                                       for p in positives]))
            row["optimum AP"] = average_precision(labels, (feats @ optimum).numpy())
        rows.append(row)
    # every column even when no gallery has other satisfying images (a small split): its optimum is NaN
    return pd.DataFrame(rows, columns=["query", "beta_c-(q)", "measured gap", "predicted gap", "vanilla AP",
                                       "satisfying images", "beta*_c- (optimum)", "beta*_c+ (optimum)", "optimum AP"])


def lemma1_summary(check: pd.DataFrame) -> dict:
    c = check.dropna(subset=["measured gap", "predicted gap"])
    return {"galleries": len(c),
            "share beta_c- > 0": float((c["beta_c-(q)"] > 0).mean()),
            "share measured gap < 0 (confusing above correct)": float((c["measured gap"] < 0).mean()),
            "corr(measured, predicted)": float(np.corrcoef(c["measured gap"], c["predicted gap"])[0, 1]),
            "sign agreement": float((np.sign(c["measured gap"]) == np.sign(c["predicted gap"])).mean()),
            "median beta*_c- (optimum)": float(check["beta*_c- (optimum)"].median()),
            "share beta*_c- < 0": float((check["beta*_c- (optimum)"] < 0).mean()),
            "mean optimum AP": float(check["optimum AP"].mean()),
            "mean vanilla AP": float(check["vanilla AP"].mean())}


def score_separation(scorers: dict, galleries: pd.DataFrame, split) -> pd.DataFrame:
    """Per method and gallery, the mean score of correct and of confusing images (KTN Fig. 3 in
    numbers: dilution lowers both, rejection separates them)."""
    rows = []
    for name, scorer in scorers.items():
        for g in galleries.itertuples():
            idx, labels, _, _ = _gallery(split, g)
            s = scorer.score(scorer.image_features(split, idx), [g.query]).numpy()[:, 0]
            rows.append({"method": name, "query": g.query, "correct": float(s[labels == 1].mean()),
                         "confusing": float(s[labels == 0].mean()), "AP": average_precision(labels, s)})
    frame = pd.DataFrame(rows)
    frame["gap"] = frame["correct"] - frame["confusing"]
    return frame


def top_k_scores(scorers: dict, gallery_row, split, k: int = 8) -> pd.DataFrame:
    """The top-k images of one gallery under each method, with whether each is correct."""
    idx, labels, _, _ = _gallery(split, gallery_row)
    rows = []
    for name, scorer in scorers.items():
        s = scorer.score(scorer.image_features(split, idx), [gallery_row.query]).numpy()[:, 0]
        for rank, j in enumerate(np.argsort(-s, kind="stable")[:k], 1):
            rows.append({"method": name, "rank": rank, "score": float(s[j]), "correct": bool(labels[j])})
    return pd.DataFrame(rows)


def pick_showcase_gallery(separation: pd.DataFrame, galleries: pd.DataFrame, ec: str, ktn: str):
    """The gallery where ``ktn``'s AP gains most over ``ec``'s (method names of ``separation``; the
    paper's Fig. 1/3 kind of example)."""
    pivot = separation.pivot_table(index="query", columns="method", values="AP")
    query = (pivot[ktn] - pivot[ec]).idxmax()
    return next(g for g in galleries.itertuples() if g.query == query)


@torch.no_grad()
def concept_similarity_bounds(bank: ConceptBank, split, image_scorer) -> pd.DataFrame:
    """alpha_c(i) for images with and without c: the non-negativity of Assumption 1 in practice."""
    feats = image_scorer.image_features(split, np.arange(len(split)))
    sims = bank.similarities(feats, list(split.categories)).numpy()
    rows = []
    for k, c in enumerate(split.categories):
        has = np.array([c in objs for objs in split.objects])
        rows.append({"concept": c, "alpha present (mean)": sims[has, k].mean() if has.any() else np.nan,
                     "alpha absent (mean)": sims[~has, k].mean(), "alpha absent (min)": sims[~has, k].min()})
    return pd.DataFrame(rows)


def pool_weight_sweep(scorer, bench, split, weights=(0.0, None, 0.02, 0.05, 0.1, 0.25, 0.5)) -> pd.DataFrame:
    """KTN's COCO-Confusion mAP and FACTOR operator accuracy as the rejection weight w_n varies
    (None: the paper's 1/N). The scorer's caches (t~, concept columns) are reused across weights."""

    operator = bench.factor[bench.factor["split"] == "operator"]
    original = (scorer.pool_weight, scorer.rejection)
    rows = []
    try:
        for w in weights:
            scorer.pool_weight, scorer.rejection = w, w != 0.0
            row = {"w_n": "1/N" if w is None else w}
            for name, frame in (("Conf-2C", bench.confusion_2c), ("Conf-3C", bench.confusion_3c)):
                row[name] = 100 * evaluate_confusion(scorer, frame, split)["mAP"] if len(frame) else np.nan
            row["FACTOR operator"] = 100 * evaluate_pairwise(scorer, operator, split)["accuracy"]
            rows.append(row)
    finally:
        scorer.pool_weight, scorer.rejection = original
    return pd.DataFrame(rows).round(1)
