"""The arithmetic of mine's speed bound (benchmarks/mine_phases.py --bound, docs/performance.md "Mining: how fast
this design can go"): checked on made-up runs whose answer is worked out by hand."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "mine_phases.py"
_spec = importlib.util.spec_from_file_location("mine_phases", SCRIPT)
mp = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mp)


def run(examined: int, matched: int, arrow: float, window: float, rows: float, drops: float, other: float) -> dict:
    return {"examined_pairs": examined, "pairs_opening_with_a_marker": matched,
            "seconds": {mp.ARROW: arrow, mp.WINDOW: window, mp.WRITE_ROWS: rows, mp.WRITE_DROPS: drops, "other": other},
            "python_one_core": {"candidates": 1200, "opened_by_a_marker": 1000,  # 1.2 candidates per matched pair
                                "prefilter_us_per_sentence": 0.5, "match_and_cut_us_per_candidate": 10.0}}


def test_bound_takes_the_unavoidable_pieces_and_the_python_side_against_the_budget():
    smaller = run(1_000_000, 100_000, arrow=1.0, window=1.0, rows=1.0, drops=0.5, other=9.0)
    larger = run(4_000_000, 400_000, arrow=3.0, window=2.0, rows=2.5, drops=0.5, other=99.0)
    bound = mp.bound(smaller, larger, target_per_core=150_000, cores=2)
    assert bound["more_examined_pairs"] == 3_000_000
    assert bound["budget_seconds_at_target"] == 10.0  # 3M pairs / (150K x 2 cores)
    assert bound["unavoidable_marginal_seconds"] == 4.5  # 2 + 1 + 1.5 + 0; "other" is not unavoidable
    assert bound["best_rate_per_core_of_the_unavoidable"] == round(3_000_000 / 4.5 / 2)
    assert bound["unavoidable_at_the_larger_scale"] == 8.0
    # Python: 3M sentences x 0.5 us + 360K candidates (300K more matched x 1.2) x 10 us = 5.1 CPU s, on 2 cores.
    assert bound["python_marginal_seconds"] == 2.55
    assert bound["best_rate_per_core_with_python"] == round(3_000_000 / (4.5 + 2.55) / 2)
    # Left for the rules: 20 CPU s - 9 (unavoidable) - 1.5 (pre-filter) = 9.5 s over 360K candidates.
    assert bound["budget_left_for_python_us_per_candidate"] == pytest.approx(26.39, abs=0.01)
    assert bound["marginal_rate_per_core"]["other"] == round(3_000_000 / 90 / 2)


def test_bound_leaves_nothing_when_the_unavoidable_pieces_exceed_the_budget():
    smaller = run(1_000_000, 100_000, arrow=1.0, window=1.0, rows=1.0, drops=0.5, other=1.0)
    larger = run(4_000_000, 400_000, arrow=9.0, window=5.0, rows=5.0, drops=1.5, other=2.0)
    bound = mp.bound(smaller, larger, target_per_core=150_000, cores=2)
    assert bound["unavoidable_marginal_seconds"] > bound["budget_seconds_at_target"]
    assert bound["budget_left_for_python_us_per_candidate"] == 0.0


def test_bound_of_runs_without_the_python_side_gives_the_unavoidable_pieces_only():
    smaller, larger = (run(n, n // 10, 1.0 * k, 1.0 * k, 1.0 * k, 0.5, 1.0) for n, k in ((1_000_000, 1), (4_000_000, 2)))
    del larger["python_one_core"]
    bound = mp.bound(smaller, larger)
    assert bound["unavoidable_marginal_seconds"] == 3.0 and "python_marginal_seconds" not in bound
