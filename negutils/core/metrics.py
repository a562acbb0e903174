"""Metrics with hand-checkable definitions."""
from __future__ import annotations

import numpy as np
import torch


class NonFiniteScores(ValueError):
    """A score or embedding is NaN or infinite: no metric of it means anything."""


def require_finite(values, what: str) -> np.ndarray:
    """``values`` as a float64 array, or ``NonFiniteScores`` naming ``what`` and the first bad rows
    (a NaN compares false with everything, so any ranking or argmax of it silently picks a winner)."""
    v = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(v)
    if bad.any():
        rows = np.flatnonzero(bad.reshape(len(v), -1).any(axis=1)) if v.ndim else np.array([0])
        raise NonFiniteScores(f"{what}: {int(bad.sum())} non-finite values in {len(rows)} rows, "
                              f"first rows {rows[:5].tolist()}")
    return v


def choice_weights(option_scores) -> np.ndarray:
    """[Q, K] share of question q's pick that goes to option k: the top-scoring options share it
    equally, so a question tied between k options gives each 1/k (a scorer that cannot tell its
    options apart is at chance, never rewarded by the column the answer happens to sit in)."""
    s = require_finite(option_scores, "option scores")
    if s.ndim != 2 or s.shape[1] < 2:
        raise ValueError(f"option scores must be [Q, K] with K >= 2; got {s.shape}")
    top = s == s.max(axis=1, keepdims=True)
    return top / top.sum(axis=1, keepdims=True)


def choice_credit(option_scores, correct) -> np.ndarray:
    """Per question, the credit for its ``correct`` option: 1 if it alone scores highest, 1/k if it
    ties for highest with k - 1 others, else 0."""
    c = np.asarray(correct, dtype=int)
    w = choice_weights(option_scores)
    if c.shape != (w.shape[0],):
        raise ValueError(f"option scores [Q, K] and correct [Q]; got {w.shape} and {c.shape}")
    return w[np.arange(len(c)), c]


def tied_choices(option_scores) -> np.ndarray:
    """Per question, whether its highest score is shared by two or more options."""
    return (choice_weights(option_scores).max(axis=1) < 1).astype(bool)


def ranks_of_targets(scores, targets) -> np.ndarray:
    """0-based rank of ``targets[q]`` in row q of ``scores`` [Q, G]; items tied with the target are
    ranked ahead of it (a pessimistic count: a constant scorer ranks every target last, not first)."""
    s = torch.as_tensor(require_finite(scores, "retrieval scores"))
    t = torch.as_tensor(np.asarray(targets), dtype=torch.long)
    if s.ndim != 2 or t.shape != (s.shape[0],):
        raise ValueError(f"scores must be [Q, G] and targets [Q]; got {tuple(s.shape)} and {tuple(t.shape)}")
    target_scores = s[torch.arange(s.shape[0]), t]
    return ((s >= target_scores[:, None]).sum(dim=1) - 1).numpy()


def recall_at_k(scores, targets, ks=(1, 5, 10)) -> dict[str, float]:
    """Fraction of queries whose single correct item is ranked within the top k."""
    ranks = ranks_of_targets(scores, targets)
    return {f"R@{k}": float((ranks < k).mean()) for k in ks}


def roc_auc(labels, scores) -> float:
    """Area under the ROC curve: P(score of a random positive > score of a random negative),
    ties counting one half (the Mann-Whitney statistic)."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels and scores must be 1-D and of equal length; got {y.shape} and {s.shape}")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"AUC needs both classes; got {n_pos} positives and {n_neg} negatives")
    ranks = _average_ranks(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def average_precision(labels, scores) -> float:
    """AP of a ranking by descending score: the mean of precision@rank over the positives' ranks
    (scikit-learn's ``average_precision_score``; tied scores share one threshold)."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels and scores must be 1-D and of equal length; got {y.shape} and {s.shape}")
    if not y.any():
        raise ValueError("AP needs at least one positive")
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    # one threshold per distinct score: the last index of each tie group
    last = np.r_[np.flatnonzero(np.diff(s_sorted)), len(s_sorted) - 1]
    tp = np.cumsum(y_sorted)[last]
    precision = tp / (last + 1)
    recall = tp / y.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def mean_average_precision(groups) -> float:
    """Macro mAP: the unweighted mean of per-group AP over (labels, scores) groups."""
    aps = [average_precision(y, s) for y, s in groups]
    if not aps:
        raise ValueError("mAP over zero groups")
    return float(np.mean(aps))


def best_ranks_of_sets(scores, positives: list) -> np.ndarray:
    """Per query, the 0-based rank of its best-scoring positive (``positives[q]``: gallery column
    indices). Ties are broken against the positives (a pessimistic count)."""
    s = require_finite(scores, "retrieval scores")
    if s.ndim != 2 or len(positives) != s.shape[0]:
        raise ValueError(f"scores must be [Q, G] with one positive set per query; got {s.shape} and {len(positives)}")
    best_rank = np.empty(s.shape[0])
    for q, pos in enumerate(positives):
        pos = np.asarray(pos, dtype=int)
        if len(pos) == 0:
            raise ValueError(f"query {q} has no positive")
        is_positive = np.zeros(s.shape[1], dtype=bool)
        is_positive[pos] = True
        # negatives at or above the best positive are ranked ahead of it
        best_rank[q] = ((s[q] >= s[q, pos].max()) & ~is_positive).sum()
    return best_rank


def recall_at_k_sets(scores, positives: list, ks=(1, 5, 10)) -> dict[str, float]:
    """Fraction of queries with at least one of ``positives[q]`` in the top k of row q."""
    best_rank = best_ranks_of_sets(scores, positives)
    return {f"R@{k}": float((best_rank < k).mean()) for k in ks}


def pairwise_hits(score_pairs, correct) -> np.ndarray:
    """Per sample, the credit for its correct caption: 1 when it scores higher than the other, 1/2
    on a tie (``choice_credit`` with two options), else 0."""
    s = np.asarray(score_pairs, dtype=np.float64)
    c = np.asarray(correct, dtype=int)
    if s.ndim != 2 or s.shape[1] != 2 or c.shape != (s.shape[0],):
        raise ValueError(f"score_pairs must be [N, 2] and correct [N]; got {s.shape} and {c.shape}")
    return choice_credit(s, c)


def pairwise_accuracy(score_pairs, correct) -> float:
    """Mean credit of the correct captions (ties earn 1/2: a scorer that cannot tell is at chance)."""
    return float(pairwise_hits(score_pairs, correct).mean())


def spearman_rho(a, b) -> float:
    """Spearman rank correlation with average ranks for ties."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"spearman_rho needs two 1-D arrays of equal length >= 2; got {x.shape} and {y.shape}")
    return float(spearman_rho_rows(x[None], y[None])[0])


def spearman_rho_rows(a, b, chunk: int = 256) -> np.ndarray:
    """``spearman_rho`` of each row of ``a`` [Q, N] with the same row of ``b``, as array operations
    over blocks of ``chunk`` rows (retention compares every query's gallery scores: one Python
    call per query cost more than the scoring)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"spearman_rho_rows needs two [Q, N] arrays of one shape, N >= 2; got {x.shape} and {y.shape}")
    out = np.empty(len(x))
    for start in range(0, len(x), chunk):
        rx, ry = _average_ranks_rows(x[start:start + chunk]), _average_ranks_rows(y[start:start + chunk])
        rx -= rx.mean(axis=1, keepdims=True)
        ry -= ry.mean(axis=1, keepdims=True)
        denom = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + chunk] = np.where(denom > 0, (rx * ry).sum(axis=1) / denom, np.nan)
    return out


def _average_ranks_rows(x: np.ndarray) -> np.ndarray:
    """``_average_ranks`` of every row: each element's tie group runs from the last group start at
    or before it to the first group end at or after it, found by running max / min along the row. The
    sort need not be stable: every member of a tie group gets the group's mean rank whatever order the
    sort leaves them in (NumPy's default sort, faster than its stable merge sort on rows of scores)."""
    q, n = x.shape
    order = np.argsort(x, axis=1)
    xs = np.take_along_axis(x, order, axis=1)
    new = np.ones((q, n), dtype=bool)
    new[:, 1:] = np.diff(xs, axis=1) != 0          # a NaN difference starts a group
    position = np.arange(n)
    starts = np.maximum.accumulate(np.where(new, position, 0), axis=1)
    last = np.ones((q, n), dtype=bool)
    last[:, :-1] = new[:, 1:]
    ends = np.minimum.accumulate(np.where(last, position + 1, n)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((q, n))
    np.put_along_axis(ranks, order, (starts + ends + 1) / 2.0, axis=1)
    return ranks


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their positions (``_average_ranks_rows`` of one row)."""
    return _average_ranks_rows(x[None])[0]


MCQ_TEMPLATES = ("positive", "negative", "hybrid")


def mcq_metrics(option_scores, correct, templates, option_types=None) -> dict:
    """NegBench MCQ metrics: accuracy overall and per correct template, and the share of wrong
    picks by the template type of the chosen option (``option_types[q][k]`` in {correct,
    positive, negative, hybrid}): a positive-type wrong pick is a false affirmation, a
    negative-type one a false negation, a hybrid-type one does both."""
    s = np.asarray(option_scores, dtype=np.float64)
    c = np.asarray(correct, dtype=int)
    t = np.asarray(templates)
    if s.ndim != 2 or c.shape != (s.shape[0],) or t.shape != c.shape:
        raise ValueError(f"option_scores [Q, K], correct [Q], templates [Q]; got {s.shape}, {c.shape}, {t.shape}")
    weights = choice_weights(s)               # a tie shares the pick between the tied options
    rows = np.arange(len(c))
    credit = weights[rows, c]
    out = {"accuracy": float(credit.mean()), "questions": int(len(c)),
           "tied_questions": int((weights.max(axis=1) < 1).sum())}
    for name in MCQ_TEMPLATES:
        mask = t == name
        out[f"{name}_accuracy"] = float(credit[mask].mean()) if mask.any() else float("nan")
        out[f"{name}_questions"] = int(mask.sum())
    if option_types is not None:
        types = np.asarray(option_types)
        wrong = weights.copy()
        wrong[rows, c] = 0.0
        total = wrong.sum()
        for name in MCQ_TEMPLATES:
            out[f"wrong_pick_{name}"] = float((wrong * (types == name)).sum() / total) if total else float("nan")
    return out
