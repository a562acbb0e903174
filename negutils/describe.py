"""Summary tables of a split: what is in the images and what the captions say."""
from __future__ import annotations

from collections import Counter

import pandas as pd

from .coco import CocoSplit


def split_summary(splits: dict[str, CocoSplit]) -> pd.DataFrame:
    """One row per split: images, objects per image, backgrounds, captions."""
    rows = []
    for name, split in splits.items():
        counts = pd.Series([len(o) for o in split.objects])
        row = {"split": name, "images": len(split), "objects/image (mean)": round(counts.mean(), 2)}
        row.update({f"{k} objects": int((counts == k).sum()) for k in range(1, int(counts.max()) + 1)})
        row["captions"] = sum(len(c) for c in split.captions)
        rows.append(row)
    return pd.DataFrame(rows).fillna(0)


def caption_statistics(split: CocoSplit, tokenizer=None) -> dict:
    """Negation rate (captions naming an absent object), objects named per caption, and length."""
    caps = [c for per_image in split.captions for c in per_image]
    if not caps:
        raise ValueError(f"split {split.name!r} has no captions")
    negated = sum(bool(c.get("negated")) for c in caps)
    stats = {"split": split.name, "captions": len(caps), "negated": negated, "negation rate": negated / len(caps),
             "objects named (mean)": sum(len(c.get("mentioned", [])) for c in caps) / len(caps),
             "words (mean)": sum(len(c["caption"].split()) for c in caps) / len(caps)}
    if tokenizer is not None and hasattr(tokenizer, "encode"):
        lengths = [len(tokenizer.encode(c["caption"])) + 2 for c in caps]
        stats["tokens (max, with SOT/EOT)"] = max(lengths)
    return stats


def first_words(split: CocoSplit, n_words: int = 3, top: int = 12) -> pd.DataFrame:
    """The most common caption openings: a quick view of the phrasing families."""
    counter = Counter(" ".join(c["caption"].split()[:n_words]) for per in split.captions for c in per)
    return pd.DataFrame(counter.most_common(top), columns=["opening", "captions"])
