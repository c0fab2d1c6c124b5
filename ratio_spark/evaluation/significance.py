"""Paired uncertainty over queries: bootstrap confidence intervals and sign-flip permutation tests.

The query is the statistical unit. Every system of a results folder is scored on the same queries, so
comparisons are *paired*:

* **Paired bootstrap** (Koehn 2004): draw the query set with replacement ``samples`` times (one draw
  shared by every system and metric, so a resample of system A and of system B hold the same queries)
  and take the mean of each resample. The interval is the percentile interval of those means (for a
  system) or of the differences of means (for a pair of systems).
* **Paired permutation test** (sign flip): under the null hypothesis that two systems are exchangeable
  on every query, each per-query difference is as likely to have either sign. The two-sided p-value is
  the share of sign assignments whose mean difference is at least as far from zero as the observed one.
  With ``2**n <= permutations`` every assignment is enumerated (exact); otherwise ``permutations``
  random assignments are drawn and ``p = (hits + 1) / (permutations + 1)``, as ``scipy.stats.
  permutation_test`` does.

Everything is seeded (``numpy.random.default_rng`` from the seed and the stratum's name), so the same
inputs give the same intervals and p-values on every run. ``tests/evaluation/test_significance.py`` checks the
bootstrap against ``scipy.stats.bootstrap`` and its closed-form variance, and the permutation test
against ``scipy.stats.permutation_test``.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ratio_spark.evaluation.settings import SignificanceConfig

# Resampling in chunks bounds memory (a chunk is chunk x queries integers) on splits of many queries.
_CHUNK = 500


def _chunks(total: int):
    for start in range(0, total, _CHUNK):
        yield start, min(total, start + _CHUNK) - start


def _rng(seed: int, stratum: str) -> np.random.Generator:
    """One generator per (seed, stratum): a move's resamples do not depend on which other moves ran."""
    return np.random.default_rng([seed, zlib.crc32(stratum.encode("utf-8"))])


def _matrix(values: np.ndarray) -> np.ndarray:
    """Queries x columns as floats (one column for a vector); an empty set of queries is an error."""
    matrix = np.asarray(values, dtype=np.float64)
    matrix = matrix[:, None] if matrix.ndim == 1 else matrix
    if matrix.shape[0] == 0:
        raise ValueError("no queries: nothing to resample")
    return matrix


def bootstrap_means(values: np.ndarray, samples: int, seed: int, stratum: str = "") -> np.ndarray:
    """Means of ``samples`` resamples of the rows of ``values`` (queries x columns), the same resampled
    rows for every column: shape (samples, columns)."""
    values = _matrix(values)
    n = values.shape[0]
    rng = _rng(seed, stratum)
    out = np.empty((samples, values.shape[1]))
    for start, size in _chunks(samples):
        rows = rng.integers(0, n, size=(size, n))  # each row: one resample of the queries, with replacement
        flat = (rows + n * np.arange(size)[:, None]).ravel()
        counts = np.bincount(flat, minlength=size * n).reshape(size, n).astype(np.float64)
        out[start:start + size] = counts @ values / n
    return out


def percentile_interval(draws: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of bootstrap draws (per column)."""
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail], axis=0)
    return low, high


def permutation_pvalues(differences: np.ndarray, permutations: int, seed: int, stratum: str = "") -> np.ndarray:
    """Two-sided paired sign-flip p-values of the mean of each column of ``differences`` (queries x columns)."""
    d = _matrix(differences)
    n = d.shape[0]
    observed = np.abs(d.mean(axis=0))
    # Means that differ from the observed one only by float rounding count as ties (as scipy does).
    threshold = observed - 1e-12 * np.maximum(1.0, observed)
    hits = np.zeros(d.shape[1])
    if 2**n <= permutations:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        hits += (np.abs(signs @ d / n) >= threshold).sum(axis=0)
        return hits / len(signs)
    rng = _rng(seed, stratum + "/permutation")
    for _, size in _chunks(permutations):
        signs = rng.choice((1.0, -1.0), size=(size, n))
        hits += (np.abs(signs @ d / n) >= threshold).sum(axis=0)
    return (hits + 1) / (permutations + 1)


def paired_permutation_test(first, second, *, permutations: int = 10_000, seed: int = 0, stratum: str = "") -> float:
    """Two-sided sign-flip p-value for ``mean(second - first) = 0`` of one pair of paired samples (the human
    evaluation's Table 2); NaN for no pairs."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if len(first) != len(second):
        raise ValueError("paired samples must have the same length")
    if len(first) == 0:
        return float("nan")
    return float(permutation_pvalues(second - first, permutations, seed, stratum)[0])


@dataclass
class PairedComparison:
    """Per stratum (move) and metric: each system's mean with its interval, and every pair's difference."""

    intervals: pd.DataFrame  # move, system, metric, queries, mean, ci_low, ci_high
    pairs: pd.DataFrame  # move, metric, system_a, system_b, queries, mean_a, mean_b, difference, ci_low, ci_high, p_value, significant


INTERVAL_COLUMNS = ["move", "system", "metric", "queries", "mean", "ci_low", "ci_high"]
PAIR_COLUMNS = ["move", "metric", "system_a", "system_b", "queries", "mean_a", "mean_b", "difference", "ci_low",
                "ci_high", "p_value", "significant"]


def compare_systems(per_query: pd.DataFrame, metrics: list[str], settings: SignificanceConfig,
                    stratum_column: str = "move", unit_column: str = "query_id") -> PairedComparison:
    """Intervals for every (stratum, system, metric) and paired tests for every pair of systems.

    ``per_query`` has one row per (stratum, system, query) with a column per metric. Systems must be
    scored on the same queries within a stratum (they are paired); a system that lacks some of them is
    an error that names it, since silently comparing different query sets would be wrong.
    """
    interval_rows: list[dict] = []
    pair_rows: list[dict] = []
    for stratum, part in per_query.groupby(stratum_column, sort=False):
        systems = list(dict.fromkeys(part["system"]))
        wide = part.pivot_table(index=unit_column, columns="system", values=metrics, aggfunc="first")
        if wide.isna().any().any():
            missing = sorted({s for (_, s), col in wide.items() if col.isna().any()})
            raise ValueError(f"{stratum}: systems {missing} are not scored on every query; paired tests need "
                             "the same queries for every system")
        n = len(wide)
        columns = [(metric, system) for metric in metrics for system in systems]
        values = wide[columns].to_numpy(dtype=np.float64)
        draws = bootstrap_means(values, settings.bootstrap_samples, settings.seed, str(stratum))
        low, high = percentile_interval(draws, settings.confidence)
        for j, (metric, system) in enumerate(columns):
            interval_rows.append({"move": stratum, "system": system, "metric": metric, "queries": n,
                                  "mean": float(values[:, j].mean()), "ci_low": float(low[j]), "ci_high": float(high[j])})
        position = {column: j for j, column in enumerate(columns)}
        pairs = [(a, b, metric) for metric in metrics for a, b in itertools.combinations(systems, 2)]
        if not pairs:
            continue
        a_idx = np.array([position[(m, a)] for a, _, m in pairs])
        b_idx = np.array([position[(m, b)] for _, b, m in pairs])
        differences = values[:, a_idx] - values[:, b_idx]
        diff_low, diff_high = percentile_interval(draws[:, a_idx] - draws[:, b_idx], settings.confidence)
        p_values = permutation_pvalues(differences, settings.permutations, settings.seed, str(stratum))
        for j, (a, b, metric) in enumerate(pairs):
            pair_rows.append({
                "move": stratum, "metric": metric, "system_a": a, "system_b": b, "queries": n,
                "mean_a": float(values[:, a_idx[j]].mean()), "mean_b": float(values[:, b_idx[j]].mean()),
                "difference": float(differences[:, j].mean()), "ci_low": float(diff_low[j]),
                "ci_high": float(diff_high[j]), "p_value": float(p_values[j]),
                "significant": bool(p_values[j] < settings.alpha),
            })
    return PairedComparison(pd.DataFrame(interval_rows, columns=INTERVAL_COLUMNS),
                            pd.DataFrame(pair_rows, columns=PAIR_COLUMNS))
