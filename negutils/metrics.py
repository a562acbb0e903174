"""Metrics with hand-checkable definitions."""
from __future__ import annotations

import numpy as np
import torch


def ranks_of_targets(scores, targets) -> np.ndarray:
    """0-based rank of ``targets[q]`` in row q of ``scores`` [Q, G] (ties count in the target's favour)."""
    s = torch.as_tensor(scores, dtype=torch.float64)
    t = torch.as_tensor(np.asarray(targets), dtype=torch.long)
    if s.ndim != 2 or t.shape != (s.shape[0],):
        raise ValueError(f"scores must be [Q, G] and targets [Q]; got {tuple(s.shape)} and {tuple(t.shape)}")
    target_scores = s[torch.arange(s.shape[0]), t]
    return (s > target_scores[:, None]).sum(dim=1).numpy()


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
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_scores = s[order]
    # average ranks over ties
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(s)]])
    for a, b in zip(starts, ends):
        ranks[order[a:b]] = (a + b + 1) / 2.0
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
