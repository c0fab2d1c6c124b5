"""The anaphora analysis against scipy's Fisher test and a hand-computed odds ratio."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy.stats import fisher_exact

from ratio_spark.silver.anaphora import anaphora_table, format_anaphora, has_anaphor


@pytest.mark.parametrize("marker,expected", [
    ("to address this issue", True), ("to address these limitations", True), ("to solve it", True),
    ("to avoid such problems", True), ("to overcome the above", True), ("to address", False),
    ("to iterate", False), ("as a solution", False), ("to thistle", False), ("To Address This", True),
])
def test_has_anaphor(marker, expected):
    assert has_anaphor(marker) is expected


def _judged():
    rows = []
    # Address: with an anaphor 15 accepted / 5 rejected, without 3 / 7; one failed pair (accepted null)
    rows += [{"move": "address", "marker": "to address this issue", "accepted": True}] * 15
    rows += [{"move": "address", "marker": "to address these issues", "accepted": False}] * 5
    rows += [{"move": "address", "marker": "to address", "accepted": True}] * 3
    rows += [{"move": "address", "marker": "to solve", "accepted": False}] * 7
    rows += [{"move": "address", "marker": "to solve it", "accepted": None}]
    # Specify: no anaphor at all
    rows += [{"move": "specify", "marker": "for example", "accepted": a} for a in (True, False, True)]
    return pd.DataFrame(rows)


def test_anaphora_table_matches_scipy_and_hand_values():
    table = anaphora_table(_judged()).set_index("move")
    a = table.loc["address"]
    assert (a.pairs, a.undecided, a.with_anaphor) == (30, 1, 20)
    assert a.share_with_anaphor == pytest.approx(20 / 30)
    assert a.accept_rate_with == pytest.approx(0.75) and a.accept_rate_without == pytest.approx(0.3)
    assert a.odds_ratio == pytest.approx(15 * 7 / (5 * 3))  # (a·d)/(b·c) = 7
    assert a.fisher_p == pytest.approx(fisher_exact([[15, 5], [3, 7]])[1])
    assert 0.01 < a.fisher_p < 0.05
    s = table.loc["specify"]
    assert s.with_anaphor == 0 and math.isnan(s.odds_ratio) and math.isnan(s.fisher_p)
    text = format_anaphora(table.reset_index())
    assert "7.00" in text and "75.0" in text and "30.0" in text
