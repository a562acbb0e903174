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

from ...benchmarks.evaluate import evaluate_mcq, evaluate_retrieval, retrieval_scores
from .scorer import PeakPatchScorer

PARTS = ("image", "query", "interaction")
ECN_ALONE = "its ECN alone (no Delta s)"      # the row of ``retrieval_with_and_without_delta`` without Delta s
CENTRED = "Delta s centred per image (an extension, not the paper's)"


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
    model without its Delta s, for the model with its Delta s centred per image (``CENTRED``), and for
    ``reference`` (the frozen model) when given: whether the SCN term or the ECN's corrected text is what
    loses the ranking, and how much of the SCN's share the image part alone explains."""
    alone = without_delta(scorer)
    rows = [] if reference is None else [{"scorer": reference.name, **_recalls(reference, bench, split)}]
    scores = {name: {q: retrieval_scores(s, getattr(bench, q), split) for q in RETRIEVAL_SETS}
              for name, s in ((scorer.name, scorer), (ECN_ALONE, alone))}
    centred = {q: centre_delta_per_image(scores[scorer.name][q], scores[ECN_ALONE][q]) for q in RETRIEVAL_SETS}
    for name, matrices in (*scores.items(), (CENTRED, centred)):
        rows.append({"scorer": name, **_recalls(scorer, bench, split, matrices)})
    return pd.DataFrame(rows)


RETRIEVAL_SETS = ("retrieval_affirmative", "retrieval_negated")


def _recalls(scorer, bench, split, scores: dict | None = None) -> dict:
    scores = scores or {}
    affirmative = evaluate_retrieval(scorer, bench.retrieval_affirmative, split,
                                     scores=scores.get("retrieval_affirmative"))
    negated = evaluate_retrieval(scorer, bench.retrieval_negated, split, source_only=True,
                                 scores=scores.get("retrieval_negated"))
    return {"R@5": 100 * affirmative["R@5"], "R-Neg@5": 100 * negated["R@5"]}


def centre_delta_per_image(with_delta: np.ndarray, without: np.ndarray) -> np.ndarray:
    """[Q, I] scores whose Delta s (``with_delta - without``) has each image's mean over the queries taken
    out: the image part of ``decompose`` removed, the query part and the interaction kept. Over one image's
    MCQ options the same centring leaves every decision as it is; on a gallery it needs the query set."""
    delta = with_delta.astype(np.float64) - without
    return (with_delta - delta.mean(axis=0, keepdims=True)).astype(np.float32)


def design_contrast(scorers: dict[str, PeakPatchScorer], bench, split, n_queries: int = 200) -> pd.DataFrame:
    """Per joint model (the chosen design's and another's): val MCQ accuracy, R@5, R-Neg@5 and the split of
    its gallery Delta s (``decompose``): what an open design choice does to each."""
    rows = []
    for name, scorer in scorers.items():
        mcq = evaluate_mcq(scorer, bench.mcq, split)["accuracy"]
        parts = decompose(gallery_delta(scorer, bench.retrieval_affirmative, split, n_queries))
        rows.append({"model": name, "MCQ val": 100 * mcq, **_recalls(scorer, bench, split), **parts})
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
    reference = by.index[0] if by.index[0] not in (model, ECN_ALONE, CENTRED) else None
    lines.append(f"Without its Delta s the same model retrieves at R@5 {alone['R@5']:.1f} and R-Neg@5 "
                 f"{alone['R-Neg@5']:.1f}, against {by.loc[model, 'R@5']:.1f} and {by.loc[model, 'R-Neg@5']:.1f} "
                 f"with it" + (f" and {by.loc[reference, 'R@5']:.1f} and {by.loc[reference, 'R-Neg@5']:.1f} for "
                               f"{reference}." if reference else "."))
    if reference:         # against the frozen model: how the lost R@5 divides between the two modules
        lost, by_delta = by.loc[reference, "R@5"] - by.loc[model, "R@5"], alone["R@5"] - by.loc[model, "R@5"]
        lines.append(f"Of the {lost:.1f} points of R@5 {model} loses against {reference}, dropping its Delta s "
                     f"wins back {by_delta:.1f}; its ECN's corrected text accounts for the other "
                     f"{lost - by_delta:.1f}.")
    else:
        raised = alone["R@5"] > by.loc[model, "R@5"]
        lines.append(f"Dropping its Delta s {'raises' if raised else 'does not raise'} R@5.")
    if CENTRED in by.index:
        won, whole = by.loc[CENTRED, "R@5"] - by.loc[model, "R@5"], alone["R@5"] - by.loc[model, "R@5"]
        share = f" ({100 * won / whole:.0f}% of what dropping it wins)" if whole > 0 else ""
        lines.append(f"Taking out only the image part (Delta s centred per image) gives R@5 "
                     f"{by.loc[CENTRED, 'R@5']:.1f} and R-Neg@5 {by.loc[CENTRED, 'R-Neg@5']:.1f}: "
                     f"{won:+.1f} points of R@5{share}.")
    ranked = correlates.dropna().reindex(correlates["Spearman rho with the offset"].abs().dropna()
                                         .sort_values(ascending=False).index)
    if len(ranked):
        top = ranked.iloc[0]
        lines.append(f"The image offset's strongest correlate: {top['image property']} "
                     f"(Spearman rho {top['Spearman rho with the offset']:+.2f} over {int(top['images'])} images).")
    return lines


def contrast_finding(contrast: pd.DataFrame) -> str:
    """One sentence on ``design_contrast``: the other design's MCQ and retrieval against the chosen one's
    (the first row), and which part of its Delta s is largest."""
    chosen, other = contrast.iloc[0], contrast.iloc[1]
    largest = max(PARTS, key=lambda p: other[f"{p} share"])
    return (f"Trained at the full budget, {other['model']} scores MCQ {other['MCQ val']:.1f}, R@5 {other['R@5']:.1f} "
            f"and R-Neg@5 {other['R-Neg@5']:.1f}, against {chosen['MCQ val']:.1f}, {chosen['R@5']:.1f} and "
            f"{chosen['R-Neg@5']:.1f} for {chosen['model']}; {100 * other[f'{largest} share']:.0f}% of its Delta s "
            f"on the gallery is the {largest} part ({100 * chosen[f'{largest} share']:.0f}% for the chosen design).")
