"""Does holistic scoring execute logical operators, or only count concepts? (LCSE sec. 3, App. C)

All analyses take image embeddings ``V`` [N, d], a presence matrix [N, C] from the ground truth,
and ``encode``, a function from captions to unit-norm text embeddings (e.g.
``ClipScorer.text_features``, which caches). Captions use FACTOR-Bench's minimal phrasings
(``factor.FORMS``, first variant) and their truth comes from its oracle parses, so "satisfies
the query" here means exactly what it means on the benchmark.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from ..benchmarks.factor import FORMS, PARSES
from ..core.logic import holds
from ..core.metrics import roc_auc, spearman_rho
from ..core.phrasing import with_article
from ..world.coco import CocoSplit

Encode = Callable[[Sequence[str]], torch.Tensor]

# The five operators of LCSE Fig. 2/3, as FACTOR-Bench forms.
OPERATORS: dict[str, str] = {"¬A": "not A", "A∧B": "A and B", "A∨B": "A or B",
                             "A∧¬B": "A but not B", "¬A∧¬B": "neither A nor B"}
QUADRANTS: dict[str, tuple[bool, bool]] = {"Both": (True, True), "A-only": (True, False),
                                           "B-only": (False, True), "Neither": (False, False)}


def presence_matrix(split: CocoSplit) -> np.ndarray:
    """[N, C] bool: image i contains category c (``split.categories`` order)."""
    column = {c: k for k, c in enumerate(split.categories)}
    out = np.zeros((len(split), len(split.categories)), dtype=bool)
    for i, objs in enumerate(split.objects):
        out[i, [column[c] for c in objs]] = True
    return out


def phrase(form: str, a: str, b: str | None = None, variant: int = 0) -> str:
    """FACTOR-Bench's caption for ``form`` over categories ``a`` (and ``b``)."""
    if form not in FORMS:
        raise KeyError(f"unknown form {form!r}; expected one of {sorted(FORMS)}")
    b = b if b is not None else a
    return FORMS[form][variant].format(a=with_article(a), b=with_article(b), A=a, B=b)


def satisfies(form: str, a_present: np.ndarray, b_present: np.ndarray) -> np.ndarray:
    """Truth of ``form`` per image, from the oracle parse."""
    parse = PARSES[form]("A", "B")
    table = {(pa, pb): holds(parse, {n for n, p in (("A", pa), ("B", pb)) if p})
             for pa in (False, True) for pb in (False, True)}
    return np.array([table[(bool(x), bool(y))] for x, y in zip(a_present, b_present)])


def _scores(encode: Encode, V: torch.Tensor, captions: Sequence[str]) -> np.ndarray:
    return (V @ encode(list(captions)).T).double().numpy()


def concept_polarity(encode: Encode, V: torch.Tensor, presence: np.ndarray,
                     categories: Sequence[str]) -> pd.DataFrame:
    """Per concept X: detection AUC of "a X" (present above absent), polarity AUC of "no X"
    (P(an image without X outscores one with X); correct negation needs > 0.5), and the Spearman
    rho between the two queries' rankings."""
    aff = _scores(encode, V, [phrase("A", c) for c in categories])
    neg = _scores(encode, V, [phrase("not A", c) for c in categories])
    rows = []
    for k, c in enumerate(categories):
        present = presence[:, k]
        if present.all() or not present.any():
            continue
        rows.append({"concept": c, "images with it": int(present.sum()),
                     "detection AUC": roc_auc(present, aff[:, k]),
                     "polarity AUC": roc_auc(~present, neg[:, k]),
                     "rho(a X, no X)": spearman_rho(aff[:, k], neg[:, k])})
    return pd.DataFrame(rows)


RANKING_KINDS = ("negation", "rephrase", "operator swap", "concept replacement", "unrelated")


def ranking_similarity(encode: Encode, V: torch.Tensor, categories: Sequence[str], n_pairs: int = 200,
                       seed: int = 0) -> pd.DataFrame:
    """Spearman rho between the image rankings of two queries (LCSE Fig. 3), for ``n_pairs``
    random concept pairs (A, B) with distinct C, D:

    negation "a A" / "no A"; rephrase "a A and a B" / "a photo of a A and a B"; operator swap
    "a A and a B" / "a A or a B"; concept replacement "a A and a B" / "a C and a B";
    unrelated "a A and a B" / "a C and a D"."""
    if len(categories) < 4:
        raise ValueError(f"ranking_similarity needs at least 4 categories, got {len(categories)}")
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_pairs):
        a, b, c, d = (categories[int(k)] for k in rng.choice(len(categories), 4, replace=False))
        both = phrase("A and B", a, b)
        rows += [("negation", phrase("A", a), phrase("not A", a)),
                 ("rephrase", both, "a photo of " + both),
                 ("operator swap", both, phrase("A or B", a, b)),
                 ("concept replacement", both, phrase("A and B", c, b)),
                 ("unrelated", both, phrase("A and B", c, d))]
    frame = pd.DataFrame(rows, columns=["kind", "query", "other"])
    first, second = _scores(encode, V, frame["query"]), _scores(encode, V, frame["other"])
    frame["rho"] = [spearman_rho(first[:, k], second[:, k]) for k in range(len(frame))]
    return frame


def eligible_pairs(presence: np.ndarray, categories: Sequence[str], min_per_quadrant: int = 5,
                   max_pairs: int = 300, seed: int = 0) -> list[tuple[str, str]]:
    """Ordered concept pairs (A, B) with at least ``min_per_quadrant`` images in each of Both,
    A-only, B-only and Neither; at most ``max_pairs`` of them, drawn with ``seed``."""
    pairs = []
    for j, k in itertools.permutations(range(len(categories)), 2):
        a, b = presence[:, j], presence[:, k]
        counts = [(a & b).sum(), (a & ~b).sum(), (~a & b).sum(), (~a & ~b).sum()]
        if min(counts) >= min_per_quadrant:
            pairs.append((categories[j], categories[k]))
    if len(pairs) > max_pairs:
        keep = np.sort(np.random.default_rng(seed).choice(len(pairs), max_pairs, replace=False))
        pairs = [pairs[i] for i in keep]
    return pairs


def quadrant_preference(encode: Encode, V: torch.Tensor, presence: np.ndarray, categories: Sequence[str],
                        pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """For every operator and pair: the mean holistic score in each quadrant and which quadrant
    wins (LCSE Fig. 2). ``winner_shares`` turns this into the heatmap's percentages."""
    if not pairs:
        raise ValueError("quadrant_preference: no concept pairs (every pair lacks images in some quadrant)")
    column = {c: k for k, c in enumerate(categories)}
    captions = [phrase(form, a, b) for a, b in pairs for form in OPERATORS.values()]
    scores = _scores(encode, V, captions)
    rows, k = [], 0
    for a, b in pairs:
        pa, pb = presence[:, column[a]], presence[:, column[b]]
        for op in OPERATORS:
            means = {q: scores[(pa == qa) & (pb == qb), k].mean() for q, (qa, qb) in QUADRANTS.items()}
            rows.append({"operator": op, "A": a, "B": b, **means, "winner": max(means, key=means.get)})
            k += 1
    return pd.DataFrame(rows)


def winner_shares(quadrants: pd.DataFrame) -> pd.DataFrame:
    """[operator x quadrant] share of pairs whose highest mean score falls in that quadrant."""
    shares = pd.crosstab(quadrants["operator"], quadrants["winner"], normalize="index")
    return shares.reindex(index=list(OPERATORS), columns=list(QUADRANTS), fill_value=0.0)


def expected_quadrants(operator: str) -> list[str]:
    """The quadrants whose images satisfy ``operator`` (the heatmap's correct cells)."""
    form = OPERATORS[operator]
    return [q for q, (qa, qb) in QUADRANTS.items() if satisfies(form, np.array([qa]), np.array([qb]))[0]]


@dataclass
class SpanResidual:
    z_span: np.ndarray        # [N] scores of the query's projection onto the concept span
    z_perp: np.ndarray        # [N] scores of the residual
    coefficients: np.ndarray  # [k] t_span = sum_j coefficients[j] * basis[j]

    @property
    def z_full(self) -> np.ndarray:
        return self.z_span + self.z_perp

    @property
    def gain(self) -> float:
        """G = Var(z_perp) / (Var(z_span) + Var(z_perp)) (LCSE sec. 3)."""
        vs, vp = self.z_span.var(), self.z_perp.var()
        return float(vp / (vs + vp)) if vs + vp > 0 else float("nan")


def span_residual(query: torch.Tensor, basis: torch.Tensor, V: torch.Tensor) -> SpanResidual:
    """Split ``query`` [d] into its least-squares projection on the span of ``basis`` [k, d] (the
    concept embeddings) and the orthogonal residual, and score both against images ``V`` [N, d].
    z_span + z_perp equals the holistic score V @ query up to float64 rounding."""
    t = query.double().reshape(-1)
    B = basis.double().reshape(-1, t.shape[0])
    coef = torch.linalg.lstsq(B.T, t[:, None]).solution[:, 0]
    t_span = B.T @ coef
    Vd = V.double()
    return SpanResidual((Vd @ t_span).numpy(), (Vd @ (t - t_span)).numpy(), coef.numpy())


AMPLIFICATIONS = (1.0, 2.0, 4.0, 8.0, 16.0)


def _share_of_first(coefficients: np.ndarray) -> float:
    """|alpha| / (|alpha| + |omega|): 0.5 when t_span weighs both concepts alike (mean pooling)."""
    magnitude = np.abs(coefficients)
    return float(magnitude[0] / magnitude.sum()) if magnitude.sum() > 0 else float("nan")


def span_residual_analysis(encode: Encode, V: torch.Tensor, presence: np.ndarray, categories: Sequence[str],
                           pairs: Sequence[tuple[str, str]], amplifications: Sequence[float] = AMPLIFICATIONS
                           ) -> pd.DataFrame:
    """Per operator and pair (LCSE sec. 3 and Fig. 4-5): the residual's *alignment* (AUC of
    z_perp for satisfying vs violating images), the holistic AUC, the gain G, the span weight
    alpha/(alpha+omega), the AUC of z_span + lambda z_perp per amplification lambda, and for A∧B
    the Spearman rho of the holistic score with mean(s_A, s_B) and with min(s_A, s_B).
    ¬A projects on t_A alone; the two-concept operators on (t_A, t_B)."""
    column = {c: k for k, c in enumerate(categories)}
    concept_text = encode([phrase("A", c) for c in categories])
    concept_scores = (V @ concept_text.T).double().numpy()
    query_text = encode([phrase(form, a, b) for a, b in pairs for form in OPERATORS.values()])
    rows, k = [], 0
    for a, b in pairs:
        pa, pb = presence[:, column[a]], presence[:, column[b]]
        for op, form in OPERATORS.items():
            basis_idx = [column[a]] if op == "¬A" else [column[a], column[b]]
            split = span_residual(query_text[k], concept_text[basis_idx], V)
            k += 1
            ok = satisfies(form, pa, pb)
            row = {"operator": op, "A": a, "B": b, "alignment": roc_auc(ok, split.z_perp),
                   "holistic AUC": roc_auc(ok, split.z_full), "gain": split.gain,
                   "span weight A": _share_of_first(split.coefficients) if len(basis_idx) == 2 else np.nan}
            row.update({f"AUC at lambda={lam:g}": roc_auc(ok, split.z_span + lam * split.z_perp)
                        for lam in amplifications})
            if op == "A∧B":
                sa, sb = concept_scores[:, column[a]], concept_scores[:, column[b]]
                row["rho with mean"] = spearman_rho(split.z_full, (sa + sb) / 2)
                row["rho with min"] = spearman_rho(split.z_full, np.minimum(sa, sb))
            rows.append(row)
    return pd.DataFrame(rows)


def null_alignment(encode: Encode, V: torch.Tensor, presence: np.ndarray, categories: Sequence[str],
                   n_directions: int = 200, seed: int = 0) -> pd.DataFrame:
    """LCSE App. C.1's null for ¬A: per concept, the residual's alignment beside that of random
    unit directions orthogonal to t_X (its percentile and z-score within that null)."""
    rng = torch.Generator().manual_seed(seed)
    concept_text = encode([phrase("A", c) for c in categories]).double()
    negated_text = encode([phrase("not A", c) for c in categories]).double()
    rows = []
    for k, c in enumerate(categories):
        absent = ~presence[:, k]
        if absent.all() or not absent.any():
            continue
        t_x = concept_text[k] / concept_text[k].norm()
        actual = roc_auc(absent, span_residual(negated_text[k], concept_text[k:k + 1], V).z_perp)
        dirs = torch.randn(n_directions, t_x.shape[0], generator=rng, dtype=torch.float64)
        dirs = dirs - (dirs @ t_x)[:, None] * t_x[None]
        dirs = dirs / dirs.norm(dim=1, keepdim=True)
        z = (V.double() @ dirs.T).numpy()
        null = np.array([roc_auc(absent, z[:, j]) for j in range(n_directions)])
        rows.append({"concept": c, "alignment": actual, "null mean": null.mean(), "null sd": null.std(),
                     "percentile": float((null < actual).mean()),
                     "z": float((actual - null.mean()) / null.std()) if null.std() > 0 else np.nan})
    return pd.DataFrame(rows)


def negation_direction(encode: Encode, V: torch.Tensor, presence: np.ndarray, categories: Sequence[str],
                       seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Delta_X = g("not a X") - g("a X") per concept (LCSE App. C.2): its norm, its AUC for ranking
    images without X above images with X, and how consistent its direction is across concepts
    (mean pairwise cosine, beside that of random Gaussian directions)."""
    aff = encode([phrase("A", c) for c in categories]).double()
    neg = encode([f"not {with_article(c)}" for c in categories]).double()
    delta = neg - aff
    z = (V.double() @ delta.T).numpy()
    rows = []
    for k, c in enumerate(categories):
        present = presence[:, k]
        if present.all() or not present.any():
            continue
        rows.append({"concept": c, "norm": float(delta[k].norm()), "delta AUC": roc_auc(~present, z[:, k]),
                     "mean z with X": float(z[present, k].mean()), "mean z without X": float(z[~present, k].mean())})
    table = pd.DataFrame(rows)
    unit = delta / delta.norm(dim=1, keepdim=True)
    rand = torch.randn(delta.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    rand = rand / rand.norm(dim=1, keepdim=True)
    upper = torch.triu_indices(len(categories), len(categories), offset=1)

    def pairwise(x):
        cos = (x @ x.T)[upper[0], upper[1]].numpy()
        return float(cos.mean()), float(cos.std())

    (c_mean, c_sd), (r_mean, r_sd) = pairwise(unit), pairwise(rand)
    summary = {"mean norm": float(table["norm"].mean()), "pairwise cosine": c_mean, "pairwise cosine sd": c_sd,
               "random pairwise cosine": r_mean, "random pairwise cosine sd": r_sd,
               "mean delta AUC": float(table["delta AUC"].mean())}
    return table, summary
