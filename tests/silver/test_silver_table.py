"""The AND rule (combine) and the ``silver`` Delta table: contents, nulls for failures, per-split overwrite."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from ratio_spark.silver.judge import SKIPPED, VERDICT_COLUMNS, combine
from ratio_spark.silver.pairs import load_pairs
from ratio_spark.silver.sampling import sample_pairs
from ratio_spark.silver.table import SILVER_SCHEMA, read_silver, silver_rows, write_silver


def _verdict(qid, position, prompt, accept, error=None, move="address"):
    return {"query_id": qid, "move": move, "position": position, "prompt_id": prompt, "prompt_sha256": "abc",
            "accept": accept, "reason": None if accept is None else f"{prompt} says {accept}", "error": error,
            "cached": False, "prompt_tokens": 10, "completion_tokens": 5}


def test_and_rule_with_failures_and_skips():
    rows = [
        _verdict("q1", 0, "a-v1", True), _verdict("q1", 1, "b-v1", True),      # both accept
        _verdict("q2", 0, "a-v1", True), _verdict("q2", 1, "b-v1", False),     # one rejects
        _verdict("q3", 0, "a-v1", None, "connection_error"), _verdict("q3", 1, "b-v1", True),  # unknown
        _verdict("q4", 0, "a-v1", None, "http_500"), _verdict("q4", 1, "b-v1", False),  # rejected anyway
        _verdict("q5", 0, "a-v1", False), _verdict("q5", 1, "b-v1", None, SKIPPED),  # short-circuited
    ]
    out = combine(pd.DataFrame(rows, columns=VERDICT_COLUMNS)).set_index("query_id")
    assert out["status"].to_dict() == {"q1": "accepted", "q2": "rejected", "q3": "failed", "q4": "rejected",
                                       "q5": "rejected"}
    assert out["accepted"].to_dict() == {"q1": True, "q2": False, "q3": None, "q4": False, "q5": False}


def test_silver_table_rows_roundtrip_and_split_overwrite(silver_tables, tmp_path):
    pairs = load_pairs(lambda name: str(silver_tables / name), "test")
    sample = sample_pairs(pairs, {"address": 4, "specify": 3}, seed=1)
    verdicts = []
    for i, qid in enumerate(sorted(sample.pairs["query_id"])):
        move = sample.pairs.set_index("query_id").at[qid, "move"]
        verdicts += [_verdict(qid, 0, "ordered-v1", i % 2 == 0, move=move),
                     _verdict(qid, 1, "anchored-v1", True if i != 2 else None, None if i != 2 else "invalid_json", move=move)]
    verdicts = pd.DataFrame(verdicts, columns=VERDICT_COLUMNS)
    outcome = combine(verdicts)
    table = silver_rows(sample.pairs, verdicts, outcome, model="gemma-local", model_id="gemma", seed=1)
    assert table.schema == SILVER_SCHEMA and table.num_rows == 7
    location = str(tmp_path / "silver")
    write_silver(table, location)
    back = read_silver(location, "test").set_index("query_id")
    assert len(back) == 7 and back.index.is_unique
    first = sorted(sample.pairs["query_id"])
    assert back.at[first[0], "accepted"] == True and back.at[first[1], "accepted"] == False  # noqa: E712
    assert back.at[first[2], "status"] == "failed" and pd.isna(back.at[first[2], "accepted"])
    v = list(back.at[first[2], "verdicts"])
    assert [x["prompt_id"] for x in v] == ["ordered-v1", "anchored-v1"] and v[1]["error"] == "invalid_json"
    assert list(back.at[first[0], "prompt_ids"]) == ["ordered-v1", "anchored-v1"]
    assert set(back["judge_model"]) == {"gemma-local"} and set(back["sample_seed"]) == {1}
    # another split is kept when the test split is rewritten; a rewrite replaces, never appends
    other = table.set_column(0, "split", pa.array(["validation"] * 7))
    write_silver(other, location)
    write_silver(table, location)
    write_silver(table, location)
    everything = read_silver(location)
    assert everything.groupby("split").size().to_dict() == {"test": 7, "validation": 7}


def test_rows_need_a_verdict_for_every_sampled_pair(silver_tables):
    pairs = load_pairs(lambda name: str(silver_tables / name), "test").head(2).assign(stratum="x")
    verdicts = pd.DataFrame([_verdict(pairs.query_id.iloc[0], 0, "a-v1", True)], columns=VERDICT_COLUMNS)
    with pytest.raises(ValueError, match="no verdict"):
        silver_rows(pairs, verdicts, combine(verdicts), model="m", model_id="m", seed=0)
    with pytest.raises(FileNotFoundError, match="silver build"):
        read_silver("/nonexistent/silver")
