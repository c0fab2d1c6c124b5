"""The stage-wise funnel (ratio_spark.evaluation.funnel) on a run constructed by hand, where exposure, selection
and ranking are known: ten queries, a first stage, and a reranker that fails on one query and is not sent two."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ratio_spark.evaluation.funnel import funnel_table, plot_funnel

# query: (first-stage gold rank, reranked gold rank, rerank status); None = gold not ranked
RUN = {
    "q0": (1, 1, "reranked"),
    "q1": (4, 1, "reranked"),      # promoted to the top
    "q2": (15, 2, "reranked"),     # exposed, brought into the top 10
    "q3": (30, 12, "repaired"),    # exposed, left outside the top 10
    "q4": (2, 5, "reranked"),      # demoted, still kept
    "q5": (8, None, "failed"),     # the answer failed: a miss (scored zero), not skipped
    "q6": (60, 3, "reranked"),
    "q7": (150, 150, "not_sent"),  # gold outside the window: never sent, keeps its first-stage rank
    "q8": (None, None, "not_sent"),
    "q9": (99, 20, "reranked"),
}
WINDOW = 100


def _per_query() -> pd.DataFrame:
    rows = []
    for qid, (first, final, status) in RUN.items():
        rows.append({"pool": "full", "move": "specify", "system": "bm25", "query_id": qid, "gold_rank": first})
        rows.append({"pool": "full", "move": "specify", "system": "bm25+rerank", "query_id": qid, "gold_rank": final,
                     "rerank_status": status})
    rows.append({"pool": "oracle_a", "move": "specify", "system": "bm25", "query_id": "q0", "gold_rank": 1})  # ignored
    return pd.DataFrame(rows)


SYSTEMS = [{"name": "bm25", "label": "BM25"}, {"name": "bm25+rerank", "label": "BM25 + rerank", "first_stage": "bm25"}]


def test_the_funnel_of_a_constructed_run():
    table = funnel_table(_per_query(), SYSTEMS, WINDOW).set_index("system")
    first, reranked = table.loc["bm25"], table.loc["bm25+rerank"]
    n = len(RUN)
    # exposure: gold in the first stage's top 100 -> q0 q1 q2 q3 q4 q5 q6 q9 = 8 of 10, for both pipelines
    assert first["exposed"] == reranked["exposed"] == 8 / n and first["exposed_queries"] == 8
    # selection: gold in the final top 10. First stage: q0 (1), q1 (4), q4 (2), q5 (8) = 4.
    # Reranked: q0 (1), q1 (1), q2 (2), q4 (5), q6 (3) = 5; q5 failed counts as a miss.
    assert first["selected"] == 4 / n and reranked["selected"] == 5 / n
    assert first["gain_kept"] == pytest.approx(4 / 8) and reranked["gain_kept"] == pytest.approx(5 / 8)
    # ranking over all ten queries, failures as zero
    assert first["mrr_at_10"] == pytest.approx((1 + 1 / 4 + 1 / 2 + 1 / 8) / n)
    assert reranked["mrr_at_10"] == pytest.approx((1 + 1 + 1 / 2 + 1 / 5 + 1 / 3) / n)
    ndcg = lambda ranks: sum(1 / math.log2(r + 1) for r in ranks) / n  # noqa: E731
    assert first["ndcg_at_10"] == pytest.approx(ndcg([1, 4, 2, 8]))
    assert reranked["ndcg_at_10"] == pytest.approx(ndcg([1, 1, 2, 5, 3]))
    assert reranked["rank_quality"] == pytest.approx(ndcg([1, 1, 2, 5, 3]) * n / 5)
    # the paper's view: only the 8 exposed queries
    assert reranked["mrr_at_10_exposed_only"] == pytest.approx((1 + 1 + 1 / 2 + 1 / 5 + 1 / 3) / 8)
    assert (reranked["not_sent"], reranked["failed"], reranked["repaired"]) == (2, 1, 1)
    assert (first["not_sent"], first["failed"]) == (0, 0) and pd.isna(first["first_stage"])
    # the nesting holds
    for row in (first, reranked):
        assert row["ndcg_at_10"] <= row["selected"] <= row["exposed"]


def test_a_funnel_that_does_not_nest_is_refused(tmp_path):
    frame = _per_query()
    # the reranker claims a gold in its top 10 that the first stage never exposed: impossible for a reranker
    frame.loc[(frame["system"] == "bm25+rerank") & (frame["query_id"] == "q7"), "gold_rank"] = 1
    with pytest.raises(ValueError, match="does not nest"):
        funnel_table(frame, SYSTEMS, WINDOW)
    frame = _per_query()
    frame = frame[~((frame["system"] == "bm25") & (frame["query_id"] == "q3"))]
    with pytest.raises(ValueError, match="has no row"):
        funnel_table(frame, SYSTEMS, WINDOW)


def test_the_funnel_plot_is_written(tmp_path):
    table = funnel_table(_per_query(), SYSTEMS, WINDOW)
    plot_funnel(table, tmp_path / "funnel.png", ["specify"], "test")
    assert (tmp_path / "funnel.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
