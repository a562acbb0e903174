"""One evaluation entry point for every benchmark and every method.

A *scorer* turns images and captions into scores. Vanilla CLIP is cosine similarity; PeakPatch,
KTN and LCSE are other scorers with the same two methods, so every later chapter plugs into the
same evaluation:

    class Scorer(Protocol):
        name: str
        def image_features(self, split, indices) -> Tensor        # [I, d], computed once per gallery
        def score(self, image_features, captions) -> Tensor       # [I, C]

Results are rows in the shape LAION's CLIP_benchmark writes (``dataset, model, pretrained,
task, metrics``) plus the ``split`` they were scored on, right after ``dataset`` (``embedded`` /
``val``, never ``embedded/val``), flattened to columns by ``results_frame``.
"""
from __future__ import annotations

import json
import os
from typing import Protocol, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core.metrics import (
    NonFiniteScores,
    average_precision,
    best_ranks_of_sets,
    choice_credit,
    MCQ_TEMPLATES,
    mcq_metrics,
    mean_average_precision,
    pairwise_accuracy,
    pairwise_hits,
    spearman_rho_rows,
)
from ..models.backbone import Backbone
from ..world.coco import CocoSplit


class Scorer(Protocol):
    name: str

    def image_features(self, split: CocoSplit, indices: np.ndarray) -> torch.Tensor: ...

    def score(self, image_features: torch.Tensor, captions: Sequence[str]) -> torch.Tensor: ...


class ClipScorer:
    """Cosine similarity of L2-normalised embeddings: the vanilla row of every table.
    Text embeddings are cached per caption, image embeddings per image file; on a loaded (frozen)
    backbone the image cache is the backbone's, so every scorer on it encodes an image once."""

    def __init__(self, backbone: Backbone, name: str = "vanilla", flip_average: bool = False,
                 batch_size: int = 256):
        self.backbone, self.name = backbone, name
        self.flip_average, self.batch_size = flip_average, batch_size
        self._text: dict[str, torch.Tensor] = {}
        shared = backbone.image_memo
        self._images: dict[str, torch.Tensor] = {} if shared is None else shared

    def image_features(self, split: CocoSplit, indices) -> torch.Tensor:
        indices = np.asarray(indices, dtype=int)
        key_of = image_keys(split, np.unique(indices).tolist(), self.flip_average)
        todo = sorted(i for i, key in key_of.items() if key not in self._images)
        if todo:
            feats = self.backbone.encode_images(split.images(todo), flip_average=self.flip_average,
                                                batch_size=self.batch_size, progress=len(todo) > 2000)
            self._images.update(zip((key_of[i] for i in todo), feats))
        return torch.stack([self._images[key_of[int(i)]] for i in indices])

    def text_features(self, captions: Sequence[str]) -> torch.Tensor:
        todo = sorted({c for c in captions if c not in self._text})
        if todo:
            for c, f in zip(todo, self.backbone.encode_text(todo, batch_size=self.batch_size)):
                self._text[c] = f
        return torch.stack([self._text[c] for c in captions])

    def score(self, image_features: torch.Tensor, captions: Sequence[str]) -> torch.Tensor:
        return image_features @ self.text_features(captions).T


def split_image_embeddings(backbone: Backbone, split: CocoSplit) -> torch.Tensor:
    """Every image of ``split``, by index, as the vanilla scorer encodes it (plain, in batches of 256
    in file order), through the frozen backbone's image memo: a chapter that encodes a whole split
    for a check of its own (chapter 00's retrieval and recognition) leaves the embeddings the
    benchmark chapters read, instead of encoding the same images again."""
    return ClipScorer(backbone).image_features(split, np.arange(len(split)))


def image_keys(split: CocoSplit, indices: Sequence[int], flip_average: bool) -> dict[int, str]:
    """{index: what the image's embedding is kept under}: the file (path, size and modification
    time, so an image replaced in place is encoded again) and whether its flips are averaged. Every
    scoring call keys its whole gallery, so this joins os.path strings: parsing a pathlib.Path per
    image cost more than its ``stat``."""
    root, names = os.fspath(split.image_root), split.file_names
    kind = "flip-averaged" if flip_average else "plain"
    keys = {}
    for i in indices:
        path = os.path.join(root, names[i])
        stat = os.stat(path)
        keys[i] = f"{path}:{stat.st_size}:{stat.st_mtime_ns}|{kind}"
    return keys


def _check_captions(captions: Sequence[str], where: str) -> None:
    for k, c in enumerate(captions):
        if not isinstance(c, str) or not c.strip():
            raise ValueError(f"{where}: caption {k} is empty ({c!r})")


def image_index(split: CocoSplit, image_ids, where: str) -> np.ndarray:
    lookup = {image_id: i for i, image_id in enumerate(split.image_ids)}
    missing = [i for i in image_ids if i not in lookup]
    if missing:
        raise KeyError(f"{where}: {len(missing)} image ids are not in split {split.name!r}, e.g. {missing[:3]}")
    return np.array([lookup[i] for i in image_ids], dtype=int)


def scorer_source(scorer) -> str:
    """What a scorer's numbers come from, for an error message: its name and its backbone's weights."""
    backbone = getattr(scorer, "backbone", None) or getattr(getattr(scorer, "base", None), "backbone", None)
    report = getattr(backbone, "report", None)
    return f"{scorer.name!r}" + (f" on {report.model_name} ({report.source})" if report is not None else "")


def check_finite_scores(scorer, scores: np.ndarray, captions: list, where: str) -> np.ndarray:
    """``scores`` unchanged, or ``NonFiniteScores`` naming the scorer, its weights and the captions of
    the first bad rows (``captions[row]``): a NaN would otherwise rank or be picked like a number."""
    bad = ~np.isfinite(scores)
    if bad.any():
        rows = np.flatnonzero(bad.reshape(len(scores), -1).any(axis=1))
        raise NonFiniteScores(f"{where}: scorer {scorer_source(scorer)} gave {int(bad.sum())} non-finite scores in "
                              f"{len(rows)} rows, e.g. for {captions[rows[0]]!r}")
    return scores


def _row_scores(scorer: Scorer, split: CocoSplit, indices: np.ndarray, captions_per_row: list[list[str]],
                chunk: int = 256, desc: str = "scoring") -> np.ndarray:
    """scores[q, k] = score(image q, its own caption k), in chunks. A scorer with a
    ``score_rows(image_features [N, d], captions_per_row)`` method scores only those pairs (what
    a per-pair head like PeakPatch's SCN needs); otherwise diagonal blocks of ``score`` are kept."""
    k = len(captions_per_row[0])
    out = np.empty((len(indices), k))
    for start in tqdm(range(0, len(indices), chunk), desc=desc, disable=len(indices) <= 4 * chunk):
        sl = slice(start, start + chunk)
        feats = scorer.image_features(split, indices[sl])
        if hasattr(scorer, "score_rows"):
            out[sl] = scorer.score_rows(feats, captions_per_row[sl]).numpy()
            continue
        flat_caps = [c for caps in captions_per_row[sl] for c in caps]
        s = scorer.score(feats, flat_caps).numpy().reshape(len(feats), len(feats), k)
        out[sl] = s[np.arange(len(feats)), np.arange(len(feats))]
    return check_finite_scores(scorer, out, captions_per_row, desc)


def mcq_option_scores(scorer: Scorer, mcq: pd.DataFrame, split: CocoSplit) -> np.ndarray:
    """[Q, 4] score of each question's image against each of its options."""
    indices = image_index(split, mcq["image_id"].tolist(), "MCQ")
    captions = mcq[[f"caption_{k}" for k in range(4)]].values.tolist()
    _check_captions([c for row in captions for c in row], "MCQ")
    return _row_scores(scorer, split, indices, captions, desc="MCQ")


def evaluate_mcq(scorer: Scorer, mcq: pd.DataFrame, split: CocoSplit, items: dict | None = None) -> dict:
    """NegBench MCQ metrics; ``items`` (a dict), when given, receives the per-question 0/1 outcome
    under ``accuracy`` (what chapter 06 bootstraps) and those of each correct template's questions
    under ``<template>_accuracy``."""
    scores = mcq_option_scores(scorer, mcq, split)
    if items is not None:
        credit = choice_credit(scores, mcq["correct_answer"].to_numpy())      # a tie earns 1/k
        items["accuracy"] = credit
        templates = mcq["correct_answer_template"].to_numpy()
        items.update({f"{t}_accuracy": credit[templates == t] for t in MCQ_TEMPLATES if (templates == t).any()})
    types = mcq[[f"caption_{k}_type" for k in range(4)]].values if "caption_0_type" in mcq else None
    return mcq_metrics(scores, mcq["correct_answer"].to_numpy(), mcq["correct_answer_template"].to_numpy(), types)


def _pairwise_scores(scorer: Scorer, samples: pd.DataFrame, split: CocoSplit) -> np.ndarray:
    """[S, 2] score of each sample's image with its two captions."""
    indices = image_index(split, samples["image_id"].tolist(), "pairwise")
    captions = samples[["caption_0", "caption_1"]].values.tolist()
    _check_captions([c for row in captions for c in row], "pairwise")
    return _row_scores(scorer, split, indices, captions, desc="pairwise")


def evaluate_pairwise(scorer: Scorer, samples: pd.DataFrame, split: CocoSplit, group: str | None = None,
                      items: dict | None = None) -> dict:
    """Pairwise accuracy overall and, with ``group``, per value of that column; ``items`` receives
    the per-sample outcomes."""
    scores = _pairwise_scores(scorer, samples, split)
    correct = samples["correct"].to_numpy()
    if items is not None:
        items["accuracy"] = pairwise_hits(scores, correct)
    out = {"accuracy": pairwise_accuracy(scores, correct), "samples": int(len(samples))}
    if group:
        for value, idx in samples.groupby(group).indices.items():
            out[f"accuracy[{value}]"] = pairwise_accuracy(scores[idx], correct[idx])
    return out


def _retrieval_positives(queries: pd.DataFrame, split: CocoSplit, source_only: bool = False) -> list:
    """Per query, the split indices of the images that count as hits."""
    if source_only:
        return [[i] for i in image_index(split, queries["image_id"].tolist(), "retrieval")]
    id_lists = [json.loads(p) for p in queries["positives"]]
    flat = image_index(split, [i for ids in id_lists for i in ids], "retrieval positives")
    return np.split(flat, np.cumsum([len(ids) for ids in id_lists])[:-1])


def retrieval_scores(scorer: Scorer, queries: pd.DataFrame, split: CocoSplit, chunk: int = 256) -> np.ndarray:
    """[Q, I] score of every query against every image of the split, in chunks of queries: what
    every retrieval metric reads, so one matrix serves several (R@k two ways, retention rho)."""
    feats = scorer.image_features(split, np.arange(len(split)))
    _check_captions(queries["query"].tolist(), "retrieval")
    out = np.empty((len(queries), len(split)), dtype=np.float32)
    for start in tqdm(range(0, len(queries), chunk), desc="retrieval", disable=len(queries) <= 4 * chunk):
        sl = slice(start, start + chunk)
        out[sl] = scorer.score(feats, queries["query"].iloc[sl].tolist()).T.numpy()
    return check_finite_scores(scorer, out, queries["query"].tolist(), "retrieval")


def evaluate_retrieval(scorer: Scorer, queries: pd.DataFrame, split: CocoSplit, ks=(1, 5, 10),
                       chunk: int = 256, source_only: bool = False, items: dict | None = None,
                       scores: np.ndarray | None = None) -> dict:
    """Text-to-image recall over the whole split; a query hits when any of its ``positives``
    (JSON image ids) is in the top k. ``source_only`` counts only the query's own image, NegBench's
    protocol for captions whose other satisfying images are unknown. ``items`` receives the
    per-query hits under ``R@k``. ``scores``: the ``retrieval_scores`` of these queries, when
    already computed."""
    scores = retrieval_scores(scorer, queries, split, chunk) if scores is None else scores
    positives = _retrieval_positives(queries, split, source_only)
    best_rank = np.concatenate([best_ranks_of_sets(scores[k:k + chunk], positives[k:k + chunk])
                                for k in range(0, len(queries), chunk)])
    out = {f"R@{k}": float((best_rank < k).mean()) for k in ks}
    if items is not None:
        items.update({f"R@{k}": (best_rank < k).astype(float) for k in ks})
    out.update(queries=int(len(queries)), gallery=int(len(split)),
               mean_positives=float(np.mean([len(p) for p in positives])))
    return out


def evaluate_confusion(scorer: Scorer, galleries: pd.DataFrame, split: CocoSplit, items: dict | None = None) -> dict:
    """Macro mAP over galleries: correct images are the positives, confusing ones the negatives;
    ``items`` receives each gallery's AP under ``mAP``."""
    groups = []
    for g in galleries.itertuples():
        correct, confusing = json.loads(g.correct_ids), json.loads(g.confusing_ids)
        idx = image_index(split, correct + confusing, f"gallery {g.query!r}")
        s = check_finite_scores(scorer, scorer.score(scorer.image_features(split, idx), [g.query]).numpy()[:, 0],
                                [g.query] * len(idx), "confusion")
        groups.append((np.r_[np.ones(len(correct)), np.zeros(len(confusing))], s))
    if items is not None:
        items["mAP"] = np.array([average_precision(y, s) for y, s in groups])
    return {"mAP": mean_average_precision(groups), "galleries": int(len(galleries)),
            "chance mAP": float(np.mean([y.mean() for y, _ in groups]))}


def result_row(dataset: str, split: str, model: str, pretrained: str, task: str, metrics: dict,
               source: str | None = None) -> dict:
    """One result in CLIP_benchmark's shape, with the ``split`` beside the ``dataset`` name and, from the
    benchmark suite, the ``source`` of the items scored (``Benchmarks.source``: a published file or ``built``)."""
    if "/" in str(dataset):
        raise ValueError(f"dataset {dataset!r}: name the dataset only ('embedded', 'coco'); "
                         f"the split goes in its own argument")
    where = {} if source is None else {"source": source}
    return {"dataset": dataset, "split": split, "model": model, "pretrained": pretrained, "task": task, **where,
            "metrics": metrics}


def results_frame(rows: list[dict]) -> pd.DataFrame:
    """CLIP_benchmark rows flattened: the five keys (dataset, split, model, pretrained, task), then
    one column per metric."""
    return pd.DataFrame([{k: v for k, v in r.items() if k != "metrics"} | r["metrics"] for r in rows])


def pairwise_correct(scorer: Scorer, samples: pd.DataFrame, split: CocoSplit) -> np.ndarray:
    """Per sample, the credit for ``scorer``'s choice (1, 0, or 1/2 on a tie; for stratified analyses)."""
    return pairwise_hits(_pairwise_scores(scorer, samples, split), samples["correct"].to_numpy())


def evaluate_retention(scorer: Scorer, reference: Scorer, queries: pd.DataFrame, split: CocoSplit,
                       chunk: int = 256, items: dict | None = None, scores: np.ndarray | None = None,
                       reference_scores: np.ndarray | None = None) -> dict:
    """LCSE's retention on affirmative retrieval: the scorer's R@5 (any satisfying image counts)
    and the mean over queries of Spearman's rho between its gallery scores and ``reference``'s.
    ``scores`` / ``reference_scores``: the two ``retrieval_scores`` matrices, when already computed."""

    _check_captions(queries["query"].tolist(), "retention")
    ours = retrieval_scores(scorer, queries, split, chunk) if scores is None else scores
    ref = retrieval_scores(reference, queries, split, chunk) if reference_scores is None else reference_scores
    positives = _retrieval_positives(queries, split)
    rhos = spearman_rho_rows(ours, ref)
    hits = np.concatenate([best_ranks_of_sets(ours[k:k + chunk], positives[k:k + chunk]) < 5
                           for k in range(0, len(queries), chunk)]).astype(float)
    if items is not None:
        items.update({"R@5": hits, "rho": np.asarray(rhos)})
    return {"R@5": float(hits.mean()), "rho": float(np.mean(rhos)),
            "min rho": float(np.min(rhos)), "queries": int(len(queries))}
