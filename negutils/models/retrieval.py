"""Zero-shot retrieval on a split's affirmative captions (one query per image)."""
from __future__ import annotations

import numpy as np

from ..core.metrics import recall_at_k
from ..world.coco import CocoSplit


def check_split_rows(embeddings, split: CocoSplit) -> None:
    """A ``ValueError`` naming the split unless ``embeddings`` (None passes) has one row per image of
    it: embeddings given by split index would otherwise score images against other images' rows."""
    if embeddings is not None and len(embeddings) != len(split):
        raise ValueError(f"image_embeddings has {len(embeddings)} rows; split {split.name!r} has {len(split)} images")


def retrieval_queries(split: CocoSplit, n_images: int | None = None) -> tuple[np.ndarray, list[str]]:
    """The first caption of each image when it is affirmative (not negated), for the first
    ``n_images`` images. Returns (image indices, captions)."""
    idx, queries = [], []
    for i in range(len(split) if n_images is None else min(n_images, len(split))):
        if split.captions[i] and not split.captions[i][0].get("negated"):
            idx.append(i)
            queries.append(split.captions[i][0]["caption"])
    if not idx:
        raise ValueError(f"split {split.name!r} has no affirmative captions to retrieve with")
    return np.asarray(idx), queries


def retrieval_recall(text_image_scores, ks=(1, 5, 10)) -> dict[str, float]:
    """Text->image and image->text recall for a square [Q, Q] score matrix whose diagonal pairs
    are the ground truth, with chance levels k / Q."""
    n = text_image_scores.shape[0]
    targets = np.arange(n)
    t2i = recall_at_k(text_image_scores, targets, ks)
    i2t = recall_at_k(text_image_scores.T, targets, ks)
    out = {"gallery": n}
    out.update({f"t2i_{k}": v for k, v in t2i.items()})
    out.update({f"i2t_{k}": v for k, v in i2t.items()})
    out.update({f"chance_R@{k}": min(1.0, k / n) for k in ks})
    return out
