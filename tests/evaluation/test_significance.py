"""Paired bootstrap intervals and sign-flip permutation tests (ratio_spark.evaluation.significance): parity with
scipy.stats.bootstrap / scipy.stats.permutation_test and with the bootstrap's closed-form variance, determinism
under a fixed seed, and the per-move, per-pair tables the results folders carry."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ratio_spark.evaluation.settings import SignificanceConfig
from ratio_spark.evaluation.significance import (
    bootstrap_means,
    compare_systems,
    percentile_interval,
    permutation_pvalues,
)


def _scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two systems' per-query reciprocal ranks (many zeros, like MRR@10), correlated as paired runs are."""
    rng = np.random.default_rng(seed)
    ranks_a = rng.integers(1, 25, size=n)
    ranks_b = np.maximum(1, ranks_a + rng.integers(-3, 6, size=n))
    rr = lambda r: np.where(r <= 10, 1.0 / r, 0.0)  # noqa: E731
    return rr(ranks_a), rr(ranks_b)


def test_bootstrap_variance_matches_the_closed_form():
    # The bootstrap distribution of a mean has variance (population variance) / n, exactly; with 20,000
    # resamples the estimate is within a few percent of it.
    a, _ = _scores(300, 1)
    draws = bootstrap_means(a, 20_000, seed=7)[:, 0]
    closed_form = a.var(ddof=0) / len(a)
    assert draws.var() == pytest.approx(closed_form, rel=0.05)
    assert draws.mean() == pytest.approx(a.mean(), abs=3 * np.sqrt(closed_form / 20_000) + 1e-12)


def test_percentile_intervals_agree_with_scipy_bootstrap():
    a, b = _scores(250, 2)
    ours = bootstrap_means(np.column_stack([a, a - b]), 20_000, seed=11)
    low, high = percentile_interval(ours, 0.95)
    single = stats.bootstrap((a,), np.mean, n_resamples=20_000, method="percentile", confidence_level=0.95,
                             random_state=np.random.default_rng(3))
    paired = stats.bootstrap((a, b), lambda x, y, axis=-1: np.mean(x - y, axis=axis), paired=True,
                             n_resamples=20_000, method="percentile", confidence_level=0.95,
                             random_state=np.random.default_rng(4))
    # Two Monte Carlo estimates of the same interval: they agree to a small fraction of its width.
    for (lo, hi), ci in [((low[0], high[0]), single.confidence_interval), ((low[1], high[1]), paired.confidence_interval)]:
        width = ci.high - ci.low
        assert lo == pytest.approx(ci.low, abs=0.05 * width)
        assert hi == pytest.approx(ci.high, abs=0.05 * width)


def test_the_permutation_test_equals_scipy_exactly_when_it_enumerates():
    a, b = _scores(12, 5)  # 2**12 = 4096 sign assignments <= 10,000: both enumerate every one
    ours = permutation_pvalues(a - b, 10_000, seed=1)[0]
    theirs = stats.permutation_test((a, b), lambda x, y, axis=-1: np.mean(x - y, axis=axis), permutation_type="samples",
                                    n_resamples=10_000, alternative="two-sided", vectorized=True).pvalue
    assert 0 < ours < 1
    assert ours == pytest.approx(theirs, abs=1e-12)


def test_the_permutation_test_agrees_with_scipy_by_monte_carlo():
    a, b = _scores(80, 6)
    a = a + 0.04  # a real difference, so p is small but not tiny
    ours = permutation_pvalues(a - b, 20_000, seed=2)[0]
    theirs = stats.permutation_test((a, b), lambda x, y, axis=-1: np.mean(x - y, axis=axis), permutation_type="samples",
                                    n_resamples=20_000, alternative="two-sided", vectorized=True,
                                    random_state=np.random.default_rng(9)).pvalue
    assert ours == pytest.approx(theirs, abs=0.01)
    assert permutation_pvalues(np.zeros(80), 5000, seed=2)[0] == 1.0  # identical systems: p = 1


def test_everything_is_deterministic_under_a_fixed_seed():
    a, b = _scores(200, 8)
    values = np.column_stack([a, b])
    assert np.array_equal(bootstrap_means(values, 1000, seed=5, stratum="specify"),
                          bootstrap_means(values, 1000, seed=5, stratum="specify"))
    assert not np.array_equal(bootstrap_means(values, 1000, seed=5, stratum="specify"),
                              bootstrap_means(values, 1000, seed=6, stratum="specify"))
    assert not np.array_equal(bootstrap_means(values, 1000, seed=5, stratum="specify"),
                              bootstrap_means(values, 1000, seed=5, stratum="address"))
    p1 = permutation_pvalues(a - b, 5000, seed=5, stratum="specify")
    assert np.array_equal(p1, permutation_pvalues(a - b, 5000, seed=5, stratum="specify"))
    # one resample is shared by every column: the paired difference of the draws is the draw of the difference
    draws = bootstrap_means(np.column_stack([a, b, a - b]), 1000, seed=5)
    assert np.allclose(draws[:, 0] - draws[:, 1], draws[:, 2])


def _per_query(systems: dict[str, np.ndarray], move: str = "specify") -> pd.DataFrame:
    rows = []
    for name, values in systems.items():
        for i, value in enumerate(values):
            rows.append({"move": move, "system": name, "query_id": f"q{i:03d}", "M@10": value, "R@10": float(value > 0)})
    return pd.DataFrame(rows)


def test_compare_systems_tables_every_pair_and_metric():
    a, b = _scores(150, 10)
    c = a.copy()
    c[:60] = 1.0  # clearly better than a
    settings = SignificanceConfig(bootstrap_samples=1000, permutations=2000, seed=3)
    result = compare_systems(_per_query({"A": a, "B": b, "C": c}), ["M@10", "R@10"], settings)
    assert len(result.intervals) == 3 * 2 and len(result.pairs) == 3 * 2  # 3 systems x 2 metrics; 3 pairs x 2 metrics
    row = result.intervals.query("system == 'A' and metric == 'M@10'").iloc[0]
    assert row["mean"] == pytest.approx(a.mean()) and row["ci_low"] < row["mean"] < row["ci_high"]
    ac = result.pairs.query("system_a == 'A' and system_b == 'C' and metric == 'M@10'").iloc[0]
    assert ac["difference"] == pytest.approx(a.mean() - c.mean())
    assert ac["significant"] and ac["p_value"] < 0.05 and ac["ci_high"] < 0
    assert ac["p_value"] == pytest.approx(permutation_pvalues(a - c, 2000, settings.seed, "specify")[0])
    again = compare_systems(_per_query({"A": a, "B": b, "C": c}), ["M@10", "R@10"], settings)
    pd.testing.assert_frame_equal(result.pairs, again.pairs)


def test_systems_scored_on_different_queries_are_refused():
    a, b = _scores(20, 11)
    frame = _per_query({"A": a, "B": b})
    frame = frame[~((frame["system"] == "B") & (frame["query_id"] == "q003"))]
    with pytest.raises(ValueError, match="not scored on every query"):
        compare_systems(frame, ["M@10"], SignificanceConfig())
