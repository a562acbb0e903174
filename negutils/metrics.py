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
