"""Summary tables of a split: what is in the images and what the captions say."""
from __future__ import annotations

import json
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


def caption_structures(splits: dict[str, CocoSplit]) -> pd.DataFrame:
    """Share of each split's captions per grammatical structure (``world.grammar``), in percent;
    captions that record none (real datasets) count as 'unrecorded'."""
    rows = {name: Counter(c.get("structure", "unrecorded") for per in split.captions for c in per)
            for name, split in splits.items()}
    table = pd.DataFrame(rows).fillna(0).T
    return (100 * table.div(table.sum(axis=1), axis=0)).round(1)


def first_words(split: CocoSplit, n_words: int = 3, top: int = 12) -> pd.DataFrame:
    """The most common caption openings: a quick view of the phrasing families."""
    counter = Counter(" ".join(c["caption"].split()[:n_words]) for per in split.captions for c in per)
    return pd.DataFrame(counter.most_common(top), columns=["opening", "captions"])


def benchmark_statistics(bench) -> dict[str, pd.DataFrame]:
    """The tables chapter 01 shows for one split's benchmarks: template and position balance,
    gallery composition, operator counts."""

    mcq = bench.mcq
    position = pd.crosstab(mcq["correct_answer_template"], mcq["correct_answer"], margins=True)
    position.columns = [f"correct at {c}" if c != "All" else "all" for c in position.columns]
    # NegBench's published retrieval CSV does not record which template made a query
    negated = bench.retrieval_negated
    retrieval = negated.assign(template=negated.get("template", "unrecorded")).groupby("template").agg(
        queries=("query", "size"), mean_positives=("positives", lambda p: sum(len(json.loads(x)) for x in p) / len(p)))
    galleries = []
    for name in ("confusion_2c", "confusion_3c"):
        g = getattr(bench, name)
        if len(g):
            affirmed = {c for p in g["positives"] for c in json.loads(p)}
            galleries.append({"benchmark": name, "galleries": len(g), "mean correct": g["n_correct"].mean(),
                              "mean confusing": g["n_confusing"].mean(), "affirmed concepts": len(affirmed),
                              "negated concepts": g["negative"].nunique()})
    factor = bench.factor.groupby(["split", "test"]).agg(samples=("correct", "size"),
                                                         correct_first=("correct", lambda c: float((c == 0).mean())))
    existence = bench.existence.groupby("negated_is_correct").size().rename("samples").to_frame()
    return {"mcq templates x correct position": position, "retrieval-neg": retrieval,
            "coco-confusion": pd.DataFrame(galleries), "factor-bench": factor, "valse existence": existence}
