"""Negation training data from the ``negtrain`` split (PeakPatch App. 0.J without the LLM).

Each row pairs an image with one of its affirmative captions and a *negated counterpart*: the
caption extended with the negation of one salient object that is present in the image but not
named by the caption ("A moon on a striped background" -> "A moon on a striped background
without a star" for an image that has a star). The counterpart is therefore false of the image,
which is what a hard negative must be, and the round-trip check of ``recipes.negation_pair``
guarantees a cue was added. MCQs pair the correct caption with its negated version and two
captions of other images (App. 0.J).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .coco import CocoSplit
from .phrasing import plural
from .recipes import has_negation_cue, negation_pair


def mentioned(record: dict, categories) -> set[str]:
    """Categories a caption names: the world's exact ``mentioned`` list, else a word match."""
    if "mentioned" in record:
        return set(record["mentioned"])
    text = " " + " ".join(re.findall(r"[a-z]+", record["caption"].lower())) + " "
    return {c for c in categories if f" {c} " in text or f" {plural(c)} " in text}


def build_negation_pairs(split: CocoSplit, seed: int = 0, per_image: int = 2) -> pd.DataFrame:
    """Up to ``per_image`` (caption, false negated counterpart) rows per image; images whose every
    caption already names every object it has are skipped."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(len(split)):
        present = sorted(split.objects[i])
        candidates = []
        for record in split.captions[i]:
            if has_negation_cue(record["caption"]):
                continue
            unnamed = [c for c in present if c not in mentioned(record, split.categories)]
            if unnamed:
                candidates.append((record["caption"], unnamed))
        for k in rng.permutation(len(candidates))[:per_image]:
            caption, unnamed = candidates[int(k)]
            obj = unnamed[int(rng.integers(len(unnamed)))]
            pair = negation_pair(caption, obj, rng)
            if pair is not None:
                rows.append({"image_index": i, "caption": caption.strip(), "negated": pair[0], "negated_object": obj})
    if not rows:
        raise ValueError(f"split {split.name!r}: no caption leaves a present object unnamed, so no false "
                         "negated counterpart can be built")
    return pd.DataFrame(rows)


def mcq_options(n: int, image_of_row: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """[n, 4] option indices into the 2n captions [affirmative rows..., negated rows...]: the row's
    caption (correct, column 0), its negated counterpart, and the captions of two rows showing
    other images."""
    if n < 3:
        raise ValueError(f"MCQs need at least 3 rows, got {n}")
    options = np.empty((n, 4), dtype=np.int64)
    options[:, 0] = np.arange(n)
    options[:, 1] = np.arange(n) + n
    for r in range(n):
        others = np.flatnonzero(image_of_row != image_of_row[r])
        if len(others) < 2:
            raise ValueError("MCQs need rows from at least 3 different images")
        options[r, 2:] = rng.choice(others, 2, replace=False)
    return options


@dataclass
class TrainingData:
    """Negation pairs of one split, split by image, with the split's image embeddings."""
    split: CocoSplit
    pairs: pd.DataFrame
    train_rows: np.ndarray
    held_rows: np.ndarray
    images: torch.Tensor       # [len(split), d], indexed by pairs.image_index

    @property
    def captions(self) -> list[str]:
        """What the feature cache holds: every caption, then every negated counterpart."""
        return list(self.pairs["caption"]) + list(self.pairs["negated"])


def prepare_training_data(backbone, split: CocoSplit, backbone_label: str, feature_root, held_out: float = 0.1,
                          seed: int = 0, progress: bool = True) -> TrainingData:
    from .features import ensure_image_features

    pairs = build_negation_pairs(split, seed)
    images = pairs["image_index"].unique()
    rng = np.random.default_rng(seed)
    chosen = rng.choice(images, max(3, round(held_out * len(images))), replace=False)
    held = pairs["image_index"].isin(set(chosen.tolist())).to_numpy()
    rows = np.arange(len(pairs))
    feats = ensure_image_features(backbone, split, backbone_label, feature_root, progress=progress)
    return TrainingData(split, pairs, rows[~held], rows[held], feats)
