"""Did the backbone learn the objects? Zero-shot recognition and per-category detection AUC.

Retrieval recall can be high for the wrong reasons (colour words, object counts, backgrounds);
negation of an object means nothing until the model recognises the object itself.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.metrics import choice_credit, roc_auc
from ..core.phrasing import with_article
from ..models.backbone import Backbone
from ..models.retrieval import check_split_rows
from ..world.coco import CocoSplit


def object_recognition(backbone: Backbone, split: CocoSplit, template: str = "This image features {a_x}.",
                       image_embeddings=None) -> tuple[pd.DataFrame, dict]:
    """Per category: detection AUC of the prompt's score (images containing the category against
    the rest) and zero-shot accuracy on one-object images. Returns (per-category table, summary).
    ``image_embeddings``: every image of the split, by index, already encoded."""
    categories = split.categories
    check_split_rows(image_embeddings, split)
    img = backbone.encode_images(split.images()) if image_embeddings is None else image_embeddings
    txt = backbone.encode_text([template.format(a_x=with_article(c), x=c) for c in categories])
    scores = (img @ txt.T).numpy()
    single = np.array([i for i, o in enumerate(split.objects) if len(o) == 1])
    truth = np.array([categories.index(next(iter(split.objects[i]))) for i in single], dtype=int)
    # the credit of each one-object image's own category (1/k when k categories tie for the top score)
    credit = choice_credit(scores[single], truth) if len(single) else np.array([])
    rows = []
    for k, name in enumerate(categories):
        present = np.array([name in o for o in split.objects])
        on_single = truth == k
        rows.append({"category": name, "images with it": int(present.sum()),
                     "detection AUC": roc_auc(present, scores[:, k]) if 0 < present.sum() < len(present) else np.nan,
                     "zero-shot accuracy (one-object images)": float(credit[on_single].mean())
                     if on_single.any() else np.nan})
    table = pd.DataFrame(rows)
    summary = {"split": split.name, "template": template,
               "mean detection AUC": float(table["detection AUC"].mean()),
               "zero-shot accuracy": float(credit.mean()) if len(single) else float("nan"),
               "one-object images": int(len(single)), "chance accuracy": 1.0 / len(categories)}
    return table, summary


# What an organism standing in for CLIP ViT-B/32 should reach on `val` (LCSE sec. 3 reports
# detection AUC 0.88 for ViT-B/32); R@5 over the whole split's gallery; held-out R@5 changing by
# at most one point between the last two pretraining evaluations counts as converged.
ORGANISM_TARGETS: dict[str, float] = {"mean detection AUC": 0.85, "zero-shot accuracy": 0.80, "t2i_R@5": 0.45}
CONVERGED_R5_CHANGE = 0.01


def organism_targets(recognition: dict, retrieval: dict, evaluations: pd.DataFrame | None) -> pd.DataFrame:
    """One row per target (measure, target, value, met): detection AUC, one-object zero-shot accuracy
    and t2i R@5 from ``object_recognition`` / ``backbone_retrieval_recall`` summaries, and convergence
    from the pretraining run's held-out ``evaluations`` (None for a loaded checkpoint: not measured)."""
    merged = {**recognition, **retrieval}
    missing = [k for k in ORGANISM_TARGETS if k not in merged]
    if missing:
        raise KeyError(f"organism_targets: the summaries lack {missing}")
    rows = [{"measure": k, "target": f">= {v:g}", "value": float(merged[k]), "met": bool(merged[k] >= v)}
            for k, v in ORGANISM_TARGETS.items()]
    change = np.nan
    if evaluations is not None and len(evaluations) >= 2:
        change = float(evaluations["t2i_R@5"].iloc[-1] - evaluations["t2i_R@5"].iloc[-2])
    rows.append({"measure": "held-out R@5 change, last two evaluations", "target": f"<= {CONVERGED_R5_CHANGE:g}",
                 "value": change, "met": bool(abs(change) <= CONVERGED_R5_CHANGE) if change == change else None})
    return pd.DataFrame(rows)
