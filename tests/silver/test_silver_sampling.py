"""Stratified sampling with equal allocation: hand-checked allocations, seeds, 'all', reproducibility."""

from __future__ import annotations

import json
import os
from collections import Counter
import subprocess
import sys

import pandas as pd
import pytest

from ratio_spark.silver.sampling import equal_allocation, sample_pairs

from conftest import REPO_ROOT, SILVER_FIXTURE, read_jsonl

REPO = REPO_ROOT


def test_small_strata_give_everything_and_the_rest_share_equally():
    # 50 = 1 + 5 + 22 + 22 (worked by hand)
    assert equal_allocation({"a": 1, "b": 5, "c": 100, "d": 100}, 50) == {"a": 1, "b": 5, "c": 22, "d": 22}


def test_remainder_goes_one_each_to_a_seeded_choice_of_strata():
    alloc = equal_allocation({"a": 3, "b": 3, "c": 3}, 7, seed=1)
    assert sorted(alloc.values()) == [2, 2, 3] and sum(alloc.values()) == 7
    assert alloc == equal_allocation({"c": 3, "a": 3, "b": 3}, 7, seed=1)  # not the dict order
    winners = {max(equal_allocation({"a": 3, "b": 3, "c": 3}, 7, seed=s).items(), key=lambda kv: kv[1])[0]
               for s in range(20)}
    assert len(winners) > 1  # no stratum is favoured by its name across seeds


def test_allocation_edge_cases():
    assert equal_allocation({"a": 2, "b": 3}, 10) == {"a": 2, "b": 3}  # fewer than asked: all of it
    assert equal_allocation({"a": 2, "b": 3}, 0) == {"a": 0, "b": 0}
    assert equal_allocation({}, 5) == {}
    with pytest.raises(ValueError):
        equal_allocation({"a": 1}, -1)


def test_allocation_is_equal_up_to_one_among_strata_that_are_not_exhausted():
    counts = {f"m{i}": c for i, c in enumerate([1, 2, 4, 8, 16, 32, 64, 128, 256])}
    for size in range(0, sum(counts.values()) + 1, 7):
        alloc = equal_allocation(counts, size, seed=size)
        assert sum(alloc.values()) == size
        assert all(0 <= alloc[s] <= counts[s] for s in counts)
        open_ = [alloc[s] for s in counts if alloc[s] < counts[s]]
        if open_:
            assert max(open_) - min(open_) <= 1
            assert all(alloc[s] <= max(open_) for s in counts)  # exhausted strata are the small ones


def _pairs() -> pd.DataFrame:
    rows = []
    for move, markers in {"specify": {"for example": 40, "specifically": 12, "to illustrate": 3},
                          "address": {"to address": 9, "to solve": 2}}.items():
        for marker, n in markers.items():
            rows += [{"query_id": f"q-{move}-{marker}-{i}", "move": move, "marker_entry": marker} for i in range(n)]
    return pd.DataFrame(rows)


def test_sample_pairs_sizes_all_and_missing_moves():
    sample = sample_pairs(_pairs(), {"specify": 20, "address": "all"}, seed=3)
    got = sample.pairs.groupby(["move", "marker_entry"]).size().to_dict()
    assert got == {("address", "to address"): 9, ("address", "to solve"): 2, ("specify", "for example"): 9,
                   ("specify", "specifically"): 8, ("specify", "to illustrate"): 3}
    assert sample.summary()["specify"] == {"available": 55, "sampled": 20, "strata": 3}
    assert sample_pairs(_pairs(), {"specify": 5}, seed=3).pairs["move"].unique().tolist() == ["specify"]


def test_sample_is_independent_of_row_order_and_changes_with_the_seed():
    pairs = _pairs()
    a = sample_pairs(pairs, {"specify": 20}, seed=7).pairs["query_id"]
    b = sample_pairs(pairs.sample(frac=1, random_state=1), {"specify": 20}, seed=7).pairs["query_id"]
    c = sample_pairs(pairs, {"specify": 20}, seed=8).pairs["query_id"]
    assert a.tolist() == b.tolist()
    assert set(a) != set(c)


def test_sample_is_the_same_in_another_process_with_another_hash_seed(tmp_path):
    pairs = _pairs()
    here = sample_pairs(pairs, {"specify": 17}, seed=11).pairs["query_id"].tolist()
    pairs.to_csv(tmp_path / "pairs.csv", index=False)
    code = ("import json,sys,pandas as pd; from ratio_spark.silver.sampling import sample_pairs; "
            f"p=pd.read_csv({str(tmp_path / 'pairs.csv')!r}); "
            "print(json.dumps(sample_pairs(p, {'specify': 17}, seed=11).pairs['query_id'].tolist()))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == here


def test_duplicate_ids_are_refused():
    pairs = pd.concat([_pairs().head(2)] * 2)
    with pytest.raises(ValueError, match="not unique"):
        sample_pairs(pairs, {"specify": 1})


def test_sample_of_real_pairs_read_from_delta(silver_tables):
    from ratio_spark.silver.pairs import load_pairs

    pairs = load_pairs(lambda name: str(silver_tables / name), "test")
    expected = Counter(r["move"] for r in read_jsonl(SILVER_FIXTURE / "queries.jsonl") if r["split"] == "test")
    assert len(pairs) == expected.total() and pairs["query_id"].is_unique and pairs["gold_text_original"].notna().all()
    assert expected["specify"] > 20  # so that Specify is cut to 20 below
    sample = sample_pairs(pairs, {"specify": 20, "address": "all", "broaden": "all"}, seed=13)
    by_move = sample.pairs.groupby("move").size().to_dict()
    assert by_move == {"address": expected["address"], "broaden": expected["broaden"], "specify": 20}
    spec = sample.allocation[sample.allocation.move == "specify"]
    cut = spec[spec.sampled < spec.available]  # strata that were cut: equal shares
    assert len(cut) >= 2 and cut.sampled.max() - cut.sampled.min() <= 1
    assert (spec[spec.sampled == spec.available].available <= cut.sampled.max()).all()  # up to the remainder
