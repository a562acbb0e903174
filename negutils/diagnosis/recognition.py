"""Did the backbone learn the objects? Zero-shot recognition and per-category detection AUC.

Retrieval recall can be high for the wrong reasons (colour words, object counts, backgrounds);
negation of an object means nothing until the model recognises the object itself.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.metrics import roc_auc
from ..core.phrasing import with_article
from ..models.backbone import Backbone
from ..world.coco import CocoSplit


def object_recognition(backbone: Backbone, split: CocoSplit, template: str = "This image features {a_x}.",
                       image_embeddings=None) -> tuple[pd.DataFrame, dict]:
    """Per category: detection AUC of the prompt's score (images containing the category against
    the rest) and zero-shot accuracy on one-object images. Returns (per-category table, summary)."""
    categories = split.categories
    img = backbone.encode_images(split.images()) if image_embeddings is None else image_embeddings
    txt = backbone.encode_text([template.format(a_x=with_article(c), x=c) for c in categories])
    scores = (img @ txt.T).numpy()
    single = np.array([i for i, o in enumerate(split.objects) if len(o) == 1])
    predicted = scores[single].argmax(axis=1) if len(single) else np.array([], dtype=int)
    truth = np.array([categories.index(next(iter(split.objects[i]))) for i in single], dtype=int)
    rows = []
    for k, name in enumerate(categories):
        present = np.array([name in o for o in split.objects])
        on_single = truth == k
        rows.append({"category": name, "images with it": int(present.sum()),
                     "detection AUC": roc_auc(present, scores[:, k]) if 0 < present.sum() < len(present) else np.nan,
                     "zero-shot accuracy (one-object images)": float((predicted[on_single] == k).mean())
                     if on_single.any() else np.nan})
    table = pd.DataFrame(rows)
    summary = {"split": split.name, "template": template,
               "mean detection AUC": float(table["detection AUC"].mean()),
               "zero-shot accuracy": float((predicted == truth).mean()) if len(single) else float("nan"),
               "one-object images": int(len(single)), "chance accuracy": 1.0 / len(categories)}
    return table, summary
