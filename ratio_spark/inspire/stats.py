"""Paired target-bootstrap intervals (the paper's B.2: the target is the statistical unit).

Two small functions with a plain signature (arrays of per-target scores in, numbers out), so the
evaluation's shared implementation can replace them in one place.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def bootstrap_mean_ci(values: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95,
                      seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): percentile bootstrap over targets of the mean score."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(data.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95,
                        seed: int = 0) -> tuple[float, float, float]:
    """(mean of b - a, low, high): the same resampled targets for both systems (paired)."""
    first, second = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if first.shape != second.shape:
        raise ValueError(f"paired scores need the same targets: {first.shape} vs {second.shape}")
    return bootstrap_mean_ci(second - first, resamples=resamples, confidence=confidence, seed=seed)
