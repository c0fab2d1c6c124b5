"""Metrics: parity with ir_measures (trec_eval's R@k, RR@k, nDCG@10) on the same runs, the deterministic tie
order, exclusion of a query's own sentence, and queries without results."""

from __future__ import annotations

import math
import random

import ir_measures
import numpy as np
import pytest
from ir_measures import RR, R, nDCG

from ratio_spark.evaluation.metrics import (
    CUTOFFS,
    evaluate_rankings,
    evaluate_run,
    mean_metrics,
    metric_names,
    order_run,
    query_metrics,
)
from ratio_spark.evaluation.retrieval.base import deterministic_top_k


def random_runs(seed: int, queries: int = 60, pool: int = 400, depth: int = 120, max_relevant: int = 1):
    rng = random.Random(seed)
    candidates = [f"c{i:05d}" for i in range(pool)]
    run, qrels = {}, {}
    for q in range(queries):
        qid = f"q{q:04d}"
        ranked = rng.sample(candidates, depth)
        # distinct scores, so that the order is the same under any tie rule
        run[qid] = {cid: float(depth - i) + rng.random() * 0.5 for i, cid in enumerate(ranked)}
        relevant = rng.sample(ranked[: rng.choice([1, 3, 10, 50, depth])] + rng.sample(candidates, 3),
                              rng.randint(1, max_relevant))
        qrels[qid] = set(relevant)
    return run, qrels


def ir_measures_values(run, qrels, cutoffs=CUTOFFS):
    measures = [R @ k for k in cutoffs] + [RR @ k for k in cutoffs] + [nDCG @ 10]
    names = {**{str(R @ k): f"R@{k}" for k in cutoffs}, **{str(RR @ k): f"M@{k}" for k in cutoffs}, "nDCG@10": "nDCG@10"}
    qrels_rows = [ir_measures.Qrel(q, c, 1) for q, rel in qrels.items() for c in rel]
    run_rows = [ir_measures.ScoredDoc(q, c, s) for q, scores in run.items() for c, s in scores.items()]
    out: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(measures, qrels_rows, run_rows):
        out.setdefault(metric.query_id, {})[names[str(metric.measure)]] = metric.value
    return out


@pytest.mark.parametrize("seed,max_relevant", [(0, 1), (1, 1), (2, 4)])
def test_metrics_agree_with_ir_measures_per_query(seed, max_relevant):
    run, qrels = random_runs(seed, max_relevant=max_relevant)
    ours = evaluate_run(run, qrels)
    theirs = ir_measures_values(run, qrels)
    assert set(ours) == set(theirs)
    for qid, values in ours.items():
        for name in metric_names():
            assert values[name] == pytest.approx(theirs[qid][name], abs=1e-9), (qid, name)
    # and the means, which are what the tables print
    for name, value in mean_metrics(ours).items():
        assert value == pytest.approx(np.mean([theirs[q][name] for q in theirs]), abs=1e-9)


def test_single_gold_metrics_follow_the_rank():
    ranked = [f"c{i}" for i in range(1, 30)]
    metrics = query_metrics(ranked, {"c7"})
    assert metrics["R@5"] == 0 and metrics["R@10"] == 1
    assert metrics["M@5"] == 0 and metrics["M@10"] == pytest.approx(1 / 7)
    assert metrics["nDCG@10"] == pytest.approx(1 / math.log2(8))
    missing = query_metrics(ranked, {"c99"})
    assert all(v == 0 for v in missing.values())


def test_ties_break_by_candidate_id_ascending_whatever_the_insertion_order():
    scores = {"c9": 1.0, "c2": 2.0, "c5": 1.0, "c1": 1.0, "c3": 0.5}
    assert order_run(scores) == ["c2", "c1", "c5", "c9", "c3"]
    shuffled = dict(reversed(list(scores.items())))
    assert order_run(shuffled) == order_run(scores)
    # the gold c5 is tied with c1 and c9: it ranks 3rd, after c1 and before c9
    assert evaluate_run({"q": scores}, {"q": {"c5"}})["q"]["M@3"] == pytest.approx(1 / 3)


def test_tie_order_matches_ir_measures_when_scores_are_made_explicit():
    """With ties, trec_eval has its own order; ours (id ascending) is reproduced by giving rank-based scores."""
    scores = {"c9": 1.0, "c2": 2.0, "c5": 1.0, "c1": 1.0, "c3": 0.5}
    explicit = {cid: float(100 - i) for i, cid in enumerate(order_run(scores))}
    assert evaluate_run({"q": scores}, {"q": {"c9"}}) == evaluate_run({"q": explicit}, {"q": {"c9"}})
    assert evaluate_run({"q": explicit}, {"q": {"c9"}})["q"] == pytest.approx(
        ir_measures_values({"q": explicit}, {"q": {"c9"}})["q"])


def test_exclusion_removes_the_query_sentence_before_ranking():
    scores = {"own": 9.0, "a": 5.0, "gold": 4.0}
    assert evaluate_run({"q": scores}, {"q": {"gold"}})["q"]["M@10"] == pytest.approx(1 / 3)
    assert evaluate_run({"q": scores}, {"q": {"gold"}}, exclude={"q": {"own"}})["q"]["M@10"] == pytest.approx(1 / 2)


def test_a_query_without_results_counts_as_zero():
    per_query = evaluate_rankings({"q1": ["g1"]}, {"q1": {"g1"}, "q2": {"g2"}})
    assert per_query["q2"]["M@10"] == 0
    assert mean_metrics(per_query)["M@10"] == pytest.approx(0.5)


def test_deterministic_top_k_takes_ties_at_the_cut_by_index():
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.9], dtype=np.float32)
    assert deterministic_top_k(scores, 3).tolist() == [1, 5, 0]
    assert deterministic_top_k(scores, 4).tolist() == [1, 5, 0, 2]
    assert deterministic_top_k(scores, 10).tolist() == [1, 5, 0, 2, 3, 4]
    rng = np.random.default_rng(0)
    many = rng.integers(0, 5, 1000).astype(np.float32)  # heavy ties
    top = deterministic_top_k(many, 50)
    expected = sorted(range(1000), key=lambda i: (-many[i], i))[:50]
    assert top.tolist() == expected
