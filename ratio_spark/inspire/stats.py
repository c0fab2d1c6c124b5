"""Paired target-bootstrap intervals (the paper's B.2: the target is the statistical unit).

Two small functions with a plain signature (arrays of per-target scores in, numbers out) over the
evaluation's shared resampling (``ratio_spark.evaluation.significance``: seeded, chunked, checked against
``scipy.stats.bootstrap``), so the Inspire tables and the retrieval tables compute intervals one way.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ratio_spark.evaluation.significance import bootstrap_means, percentile_interval


def bootstrap_mean_ci(values: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95,
                      seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): percentile bootstrap over targets of the mean score."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return float("nan"), float("nan"), float("nan")
    low, high = percentile_interval(bootstrap_means(data, resamples, seed), confidence)
    return float(data.mean()), float(low[0]), float(high[0])


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95,
                        seed: int = 0) -> tuple[float, float, float]:
    """(mean of b - a, low, high): the same resampled targets for both systems (paired)."""
    first, second = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if first.shape != second.shape:
        raise ValueError(f"paired scores need the same targets: {first.shape} vs {second.shape}")
    return bootstrap_mean_ci(second - first, resamples=resamples, confidence=confidence, seed=seed)
