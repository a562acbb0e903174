"""The logistic function and the percentile bootstrap, shared by every stage that needs them."""
from __future__ import annotations

import numpy as np

# Bounds the memory of one batch of resamples: 100 at once of a 100k-item array.
_BATCH_VALUES = 10_000_000


def sigmoid(x):
    """1 / (1 + exp(-x)), elementwise."""
    return 1.0 / (1.0 + np.exp(-x))


def bootstrap_interval(values, n_boot: int = 1000, level: float = 0.95,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high) of ``values`` [..., N] over its last axis, the items, with the percentile
    bootstrap interval of that mean. One resample of the items serves every leading row, so rows
    (e.g. layers) keep their joint shape within a draw. The draws depend on ``seed`` only, not on
    how many resamples are taken at once."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError(f"bootstrap_interval needs at least one item on the last axis; got shape {v.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    n = v.shape[-1]
    rng = np.random.default_rng(seed)
    means = np.empty((n_boot, *v.shape[:-1]))
    batch = max(1, _BATCH_VALUES // v.size)
    for start in range(0, n_boot, batch):
        stop = min(start + batch, n_boot)
        resampled = v[..., rng.integers(0, n, size=(stop - start, n))]     # [..., batch, N]
        means[start:stop] = np.moveaxis(resampled.mean(axis=-1), -1, 0)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail], axis=0)
    return v.mean(axis=-1), low, high
