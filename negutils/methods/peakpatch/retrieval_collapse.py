"""Why a PeakPatch model with a trained SCN loses retrieval (chapter 03): measurements, not a story.

On a retrieval gallery the SCN's correction Delta s is a matrix over (image, query). Its variance splits
exactly into an image part (each image's mean over the queries: an offset that moves an image up or down
for every query), a query part (a query's shift over every image, which leaves its ranking unchanged) and
the interaction (what re-ranks a query's images for that query's reason). An MCQ loss compares the options
of one image, so it never sees the image part; retrieval ranks images against each other, so the image
part re-ranks every gallery. ``delta_decomposition`` measures the three shares, ``without_delta`` scores
the same model with its ECN alone, and ``offset_correlates`` asks what the image part follows."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from ...benchmarks.evaluate import evaluate_retrieval
from .scorer import PeakPatchScorer

PARTS = ("image", "query", "interaction")
ECN_ALONE = "its ECN alone (no Delta s)"      # the row of ``retrieval_with_and_without_delta`` without Delta s


@torch.no_grad()
def gallery_delta(scorer: PeakPatchScorer, queries: pd.DataFrame, split, n_queries: int = 200) -> torch.Tensor:
    """Delta s of the first ``n_queries`` queries against every image of ``split``: [images, queries]."""
    if scorer.model.scn is None:
        raise ValueError(f"{scorer.name} has no SCN, so no Delta s to decompose")
    corrected, peak = scorer.text_features(queries["query"].iloc[:n_queries].tolist())
    images = scorer.image_features(split, np.arange(len(split)))
    return scorer.model.scn.pairwise(corrected, peak, images).double()


def decompose(delta: torch.Tensor) -> dict[str, float]:
    """The two-way split of a [images, queries] matrix's variance: the shares of the image main effect,
    the query main effect and their interaction (they sum to 1), and the mean |value|."""
    centred = delta - delta.mean()
    image = centred.mean(dim=1, keepdim=True)
    query = centred.mean(dim=0, keepdim=True)
    interaction = centred - image - query
    total = centred.pow(2).mean()
    if total <= 1e-20 * max(float(delta.pow(2).mean()), 1e-300):   # only rounding of a constant
        raise ValueError("Delta s is constant over the gallery: no variance to split")
    parts = {"image": image.pow(2).mean(), "query": query.pow(2).mean(), "interaction": interaction.pow(2).mean()}
    return {"mean |delta s|": float(delta.abs().mean()),
            **{f"{name} share": float(value / total) for name, value in parts.items()}}


def delta_decomposition(scorers: dict[str, PeakPatchScorer], queries: pd.DataFrame, split,
                        n_queries: int = 200) -> pd.DataFrame:
    """``decompose`` of each scorer's gallery Delta s (one row per scorer with an SCN)."""
    rows = [{"method": name, **decompose(gallery_delta(s, queries, split, n_queries))}
            for name, s in scorers.items() if s.model.scn is not None]
    return pd.DataFrame(rows)


def without_delta(scorer: PeakPatchScorer) -> PeakPatchScorer:
    """The same model scoring cos(f_I, f_hat) alone: its ECN's corrected text, no SCN term."""
    return PeakPatchScorer(scorer.backbone, scorer.model, scorer.l_p, scorer.l_a,
                           name=f"{scorer.name} without Delta s", batch_size=scorer.batch_size, taps=scorer.taps,
                           image_scorer=scorer.image_scorer, use_delta=False)


def retrieval_with_and_without_delta(scorer: PeakPatchScorer, bench, split, reference=None) -> pd.DataFrame:
    """R@5 on affirmative and negated retrieval (NegBench's source-only protocol) for the model, for the
    model without its Delta s, and for ``reference`` (the frozen model) when given: whether the SCN term or
    the ECN's corrected text is what loses the ranking."""
    scorers = {scorer.name: scorer, ECN_ALONE: without_delta(scorer)}
    if reference is not None:
        scorers = {reference.name: reference, **scorers}
    rows = []
    for name, s in scorers.items():
        affirmative = evaluate_retrieval(s, bench.retrieval_affirmative, split)
        negated = evaluate_retrieval(s, bench.retrieval_negated, split, source_only=True)
        rows.append({"scorer": name, "R@5": 100 * affirmative["R@5"], "R-Neg@5": 100 * negated["R@5"]})
    return pd.DataFrame(rows)


def image_features_of(split, reference, queries: pd.DataFrame, n_queries: int = 200) -> pd.DataFrame:
    """Per image of ``split``, what its Delta s offset could follow: its object count, its objects' summed
    box area, and its mean frozen score over the queries (how much of a hub the frozen model already
    makes it)."""
    sizes = np.array([len(o) for o in split.objects], dtype=float)
    frame = {"objects in the image": sizes}
    if split.boxes is not None:        # in pixels: a share of the image on the world's one image size
        frame["summed box area"] = np.array([sum(w * h for _, (_, _, w, h) in b) for b in split.boxes], dtype=float)
    scores = reference.score(reference.image_features(split, np.arange(len(split))),
                             queries["query"].iloc[:n_queries].tolist())
    frame["mean frozen score over the queries"] = scores.mean(dim=1).double().numpy()
    return pd.DataFrame(frame)


def offset_correlates(scorer: PeakPatchScorer, reference, queries: pd.DataFrame, split,
                      n_queries: int = 200) -> pd.DataFrame:
    """Spearman's rho between each image's Delta s offset (its mean over the queries, centred) and each of
    ``image_features_of``'s columns, with the images counted."""
    delta = gallery_delta(scorer, queries, split, n_queries)
    offset = (delta.mean(dim=1) - delta.mean()).numpy()
    features = image_features_of(split, reference, queries, n_queries)
    rows = []
    for column in features:
        values = features[column].to_numpy()
        rho = spearmanr(offset, values).statistic if np.ptp(values) > 0 else float("nan")
        rows.append({"image property": column, "Spearman rho with the offset": float(rho), "images": len(values)})
    return pd.DataFrame(rows)


def collapse_findings(decomposition: pd.DataFrame, retrieval: pd.DataFrame, correlates: pd.DataFrame,
                      model: str) -> list[str]:
    """What the three measurements say about ``model``'s retrieval, as sentences with their numbers: which
    part of Delta s dominates, how much of the R@5 lost against the frozen model (``retrieval``'s first row,
    when it has three) dropping Delta s wins back, and the image part's strongest correlate."""
    row = decomposition.set_index("method").loc[model]
    largest = max(PARTS, key=lambda p: row[f"{p} share"])
    lines = [f"{model}'s Delta s on the gallery: " + ", ".join(f"{p} {100 * row[f'{p} share']:.1f}%" for p in PARTS)
             + f" of its variance (mean |Delta s| {row['mean |delta s|']:.3f}); the {largest} part is the largest."]
    by = retrieval.set_index("scorer")
    alone = by.loc[ECN_ALONE]
    lines.append(f"Without its Delta s the same model retrieves at R@5 {alone['R@5']:.1f} and R-Neg@5 "
                 f"{alone['R-Neg@5']:.1f}, against {by.loc[model, 'R@5']:.1f} and {by.loc[model, 'R-Neg@5']:.1f} "
                 f"with it" + (f" and {by.iloc[0]['R@5']:.1f} and {by.iloc[0]['R-Neg@5']:.1f} for "
                               f"{by.index[0]}." if len(by) > 2 else "."))
    if len(by) > 2:         # against the frozen model: how the lost R@5 divides between the two modules
        lost, by_delta = by.iloc[0]["R@5"] - by.loc[model, "R@5"], alone["R@5"] - by.loc[model, "R@5"]
        lines.append(f"Of the {lost:.1f} points of R@5 {model} loses against {by.index[0]}, dropping its Delta s "
                     f"wins back {by_delta:.1f}; its ECN's corrected text accounts for the other "
                     f"{lost - by_delta:.1f}.")
    else:
        raised = alone["R@5"] > by.loc[model, "R@5"]
        lines.append(f"Dropping its Delta s {'raises' if raised else 'does not raise'} R@5.")
    ranked = correlates.dropna().reindex(correlates["Spearman rho with the offset"].abs().dropna()
                                         .sort_values(ascending=False).index)
    if len(ranked):
        top = ranked.iloc[0]
        lines.append(f"The image offset's strongest correlate: {top['image property']} "
                     f"(Spearman rho {top['Spearman rho with the offset']:+.2f} over {int(top['images'])} images).")
    return lines
