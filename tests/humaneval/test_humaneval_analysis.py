"""The human evaluation's analyses on a constructed study whose answers are worked out by hand, the
permutation test against a direct enumeration, and the qrels export."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from ratio_spark.cli.main import main
from ratio_spark.humaneval.analysis import analyse, paired_permutation_test
from ratio_spark.humaneval.qrels import label_rows, qrels
from ratio_spark.humaneval.study import Study, StudyContent, token_digest

# Three queries, lists of depth 3 (small enough to score by hand). Papers: each query's gold comes from its
# own paper; x1, y1 and z3 too (same-paper candidates), every other candidate from another paper.
QUERIES = {  # query id: (move, paper, gold, List A system)
    "q1": ("specify", "P1", "g1", "tuned"),
    "q2": ("specify", "P2", "g2", "base"),
    "q3": ("address", "P3", "g3", "base"),
}
LISTS = {
    ("q1", "base"): ["x1", "g1", "x2"], ("q1", "tuned"): ["g1", "x3", "x1"],
    ("q2", "base"): ["y1", "y2", "y3"], ("q2", "tuned"): ["y4", "g2", "y1"],
    ("q3", "base"): ["z1", "z2", "g3"], ("q3", "tuned"): ["z3", "g3", "z1"],
}
PAPERS = {"g1": "P1", "g2": "P2", "g3": "P3", "x1": "P1", "x2": "P9", "x3": "P8", "y1": "P2", "y2": "P7",
          "y3": "P7", "y4": "P6", "z1": "P5", "z2": "P5", "z3": "P3"}
# assignment id: (annotator, query, preference as shown, labels); assignment 5 is incomplete.
ANSWERS = {
    1: ("ann1", "q1", "A", {"x1": 1, "g1": 1, "x2": 0, "x3": 0}),       # A = tuned
    2: ("ann2", "q1", "tie", {"x1": 0, "g1": 1, "x2": 0, "x3": 1}),
    3: ("ann1", "q2", "B", {"y1": 0, "y2": 1, "y3": 0, "y4": 1, "g2": 0}),  # B = tuned
    4: ("ann2", "q3", "A", {"z1": 0, "z2": 0, "g3": 0, "z3": 1}),       # A = base
    5: ("ann1", "q3", None, {"z1": 1}),
}


@pytest.fixture(scope="module")
def constructed_study(tmp_path_factory):
    path = tmp_path_factory.mktemp("constructed") / "study.sqlite"
    content = StudyContent(
        meta={"split": "test", "depth": 3, "seed": 0},
        systems=[{"system": "base", "position": 0, "run_path": "-", "run_sha256": "-"},
                 {"system": "tuned", "position": 1, "run_path": "-", "run_sha256": "-"}],
        queries=[{"query_id": q, "move": move, "marker": "m", "stratum": "m", "query_text": f"query {q}",
                  "gold_candidate_id": gold, "paper_id": paper, "subfield": None, "system_a": a,
                  "system_b": "base" if a == "tuned" else "tuned"} for q, (move, paper, gold, a) in QUERIES.items()],
        candidates=[{"candidate_id": c, "text": f"text {c}", "paper_id": p} for c, p in PAPERS.items()],
        lists=[{"query_id": q, "system": s, "rank": r, "candidate_id": c}
               for (q, s), ids in LISTS.items() for r, c in enumerate(ids, start=1)],
        accounts=[{"name": n, "role": "annotator", "subfields": "", "token_sha256": token_digest(n)} for n in ("ann1", "ann2")],
        assignments=[{"assignment_id": i, "annotator": a, "query_id": q, "position": i} for i, (a, q, _, _) in ANSWERS.items()],
    )
    study = Study.create(path, content)
    for i, (_, _, preference, labels) in ANSWERS.items():
        for candidate, useful in labels.items():
            study.set_label(i, candidate, bool(useful))
        if preference:
            study.set_preference(i, preference)
    return study


def _row(table: pd.DataFrame, move: str, system: str) -> pd.Series:
    return table[(table["move"] == move) & (table["system"] == system)].iloc[0]


def test_completion_follows_the_paper_rule(constructed_study):
    # q1's lists share x1 and g1: 4 distinct candidates, one label each; assignment 5 lacks labels and a preference
    assert constructed_study.state(1)["required"] == 4 and constructed_study.state(1)["complete"]
    assert not constructed_study.state(5)["complete"]
    study = constructed_study
    frames = study.frames()
    assert frames["assignments"].set_index("assignment_id")["completed_at"].notna().to_dict() == {
        1: True, 2: True, 3: True, 4: True, 5: False}


def test_table2_by_hand(constructed_study):
    a = analyse(constructed_study.frames(), depth=3)
    assert a.counts == {"assignments": 5, "complete": 4, "incomplete": 1, "queries_in_study": 3,
                        "queries_analysed": 3, "queries_labelled_twice_or_more": 1}
    t2 = a.table2()
    # Per annotation (base): a1 HR 1 P 2/3 MRR 1; a2 HR 1 P 1/3 MRR 1/2; a3 HR 1 P 1/3 MRR 1/2; a4 HR 0 P 0 MRR 0.
    # q1 averages a1 and a2: P 1/2, MRR 3/4.   (tuned) a1 1, 2/3, 1; a2 1, 2/3, 1; a3 1, 1/3, 1; a4 1, 1/3, 1.
    expected = {
        ("specify", "base"): (100, 100 * (1 / 2 + 1 / 3) / 2, 100 * (3 / 4 + 1 / 2) / 2),
        ("specify", "tuned"): (100, 100 * (2 / 3 + 1 / 3) / 2, 100),
        ("address", "base"): (0, 0, 0),
        ("address", "tuned"): (100, 100 / 3, 100),
        ("all", "base"): (100 * 2 / 3, 100 * (1 / 2 + 1 / 3) / 3, 100 * (3 / 4 + 1 / 2) / 3),
        ("all", "tuned"): (100, 100 * (2 / 3 + 1 / 3 + 1 / 3) / 3, 100),
    }
    for (move, system), (hr, p, mrr) in expected.items():
        row = _row(t2, move, system)
        assert (row["HR"], row["P"], row["MRR"]) == pytest.approx((hr, p, mrr)), (move, system)
    # preferences mapped back: a1 "A" on q1 (A = tuned), a2 tie, a3 "B" on q2 (B = tuned), a4 "A" on q3 (A = base)
    assert (_row(t2, "specify", "tuned")["preferred"], _row(t2, "specify", "base")["preferred"],
            _row(t2, "specify", "base")["tie"]) == (2, 0, 1)
    assert (_row(t2, "all", "tuned")["preferred"], _row(t2, "all", "base")["preferred"],
            _row(t2, "all", "base")["tie"]) == (2, 1, 1)
    # p-values, 2^3 sign vectors: MRR differences (1/4, 1/2, 1): |sum| >= 7/4 for 2 of 8 -> 0.25;
    # P differences (1/6, 0, 1/3): |sum| >= 1/2 for 4 of 8 -> 0.5; HR differences (0, 0, 1): always -> 1.
    all_rows = t2[t2["move"] == "all"].iloc[0]
    assert (all_rows["p_MRR"], all_rows["p_P"], all_rows["p_HR"]) == pytest.approx((0.25, 0.5, 1.0))
    assert _row(t2, "specify", "base")["queries"] == 2 and _row(t2, "all", "tuned")["queries"] == 3


def test_table11_and_gold_rate_by_hand(constructed_study):
    t11 = analyse(constructed_study.frames(), depth=3).table11()
    base, tuned = _row(t11, "all", "base"), _row(t11, "all", "tuned")
    # base: gold in q1, q3 lists; marked useful by a1 and a2 (q1 -> 1), not by a4 (q3 -> 0);
    # beyond: q1 (a1 yes via x1, a2 no) 1/2, q2 1 (y2), q3 0; gold-only MRR: q1 1/2, q2 0, q3 1/3.
    assert base[["HR", "MRR", "gold", "gold_useful", "beyond", "MRR_gold"]].tolist() == pytest.approx(
        [200 / 3, 100 * 1.25 / 3, 200 / 3, 100 / 3, 50, 100 * (1 / 2 + 1 / 3) / 3])
    assert tuned[["HR", "MRR", "gold", "gold_useful", "beyond", "MRR_gold"]].tolist() == pytest.approx(
        [100, 100, 100, 100 / 3, 100, 100 * (1 + 1 / 2 + 1 / 2) / 3])
    assert base["MRR_all_over_gold"] == pytest.approx((1.25 / 3) / ((1 / 2 + 1 / 3) / 3))
    # gold in the list in annotations a1, a2, a4 (base; marked useful in 2) and a1-a4 (tuned; useful in 2)
    assert (base["gold_marked_useful_rate"], base["annotations_with_gold"]) == pytest.approx((200 / 3, 3))
    assert (tuned["gold_marked_useful_rate"], tuned["annotations_with_gold"]) == pytest.approx((50, 4))


def test_table12_by_hand(constructed_study):
    t12 = analyse(constructed_study.frames(), depth=3).table12()
    # base: useful non-gold x1 (a1, same paper), y2 (a3, P7): 2, one cross, papers {P1, P7};
    #       non-gold listed: a1 x1 x2, a2 x1 x2, a3 y1 y2 y3, a4 z1 z2 -> 9, cross: x2 x2 y2 y3 z1 z2 = 6.
    # tuned: x1 (a1, same), x3 (a2, P8), y4 (a3, P6), z3 (a4, same): 4, two cross, 4 papers;
    #       non-gold listed: a1 x3 x1, a2 x3 x1, a3 y4 y1, a4 z3 z1 -> 8, cross x3 x3 y4 z1 = 4.
    assert _row(t12, "all", "base")[["useful", "cross", "papers", "all_cross"]].tolist() == pytest.approx([2, 50, 2, 600 / 9])
    assert _row(t12, "all", "tuned")[["useful", "cross", "papers", "all_cross"]].tolist() == pytest.approx([4, 50, 4, 50])
    assert _row(t12, "address", "tuned")[["useful", "cross", "papers"]].tolist() == pytest.approx([1, 0, 1])


def test_agreement_by_hand(constructed_study):
    agreement = analyse(constructed_study.frames(), depth=3).agreement().set_index("move")
    # q1 by ann1 and ann2: g1 1/1, x1 1/0, x2 0/0, x3 0/1 -> 50% agreement; both marked half useful, so the
    # chance agreement is 0.5 and kappa = (0.5 - 0.5) / (1 - 0.5) = 0. Preferences: tuned vs tie -> 0%.
    row = agreement.loc["all"]
    assert (row["query_pairs"], row["candidate_pairs"]) == (1, 4)
    assert (row["label_agreement"], row["label_kappa"], row["preference_agreement"]) == pytest.approx((50, 0, 0))
    assert agreement.loc["address", "query_pairs"] == 0  # q3's second assignment is incomplete


def _enumerated_p(first, second) -> float:
    """Every sign vector of the paired differences: the share whose |mean| reaches the observed |mean|."""
    d = np.asarray(second, float) - np.asarray(first, float)
    observed = abs(d.mean())
    hits = sum(abs((np.array(signs) * d).mean()) >= observed - 1e-12 for signs in itertools.product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


def test_permutation_test_against_direct_enumeration():
    rng = np.random.default_rng(5)
    for n in (4, 7, 10):  # 2^n <= 10,000: every sign vector is enumerated, so the p-value is exact
        first, second = rng.random(n), rng.random(n) + 0.2
        assert paired_permutation_test(first, second) == pytest.approx(_enumerated_p(first, second))
    first = np.array([0, 0, 1, 0, 0.5, 1, 0, 0, 1, 0, 0, 0, 1, 0.5, 0, 0])  # 16 pairs: 65,536 vectors, sampled
    second = np.array([1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0.5, 0])
    exact = _enumerated_p(first, second)
    sampled = paired_permutation_test(first, second, permutations=10_000, seed=0)
    assert abs(sampled - exact) < 4 * math.sqrt(exact * (1 - exact) / 10_000) + 1e-4
    assert sampled == paired_permutation_test(first, second, permutations=10_000, seed=0)  # fixed seed
    assert paired_permutation_test([1, 2], [1, 2]) == 1.0 and math.isnan(paired_permutation_test([], []))


def test_qrels_by_hand(constructed_study, tmp_path):
    labels = label_rows(constructed_study.frames())
    assert len(labels) == sum(len(a[3]) for a in ANSWERS.values())  # every label, complete or not
    assert labels.loc[(labels["query_id"] == "q1") & (labels["candidate_id"] == "x1"), "rank_tuned"].tolist() == [3, 3]
    majority = qrels(labels, "majority").set_index(["query_id", "candidate_id"])["relevance"]
    # q1: g1 useful twice -> 1; x1 and x3 split 1:1 -> not a majority; q3 only from the complete a4 (z3).
    assert {k for k, v in majority.items() if v} == {("q1", "g1"), ("q2", "y2"), ("q2", "y4"), ("q3", "z3")}
    lenient = qrels(labels, "any").set_index(["query_id", "candidate_id"])["relevance"]
    assert {k for k, v in lenient.items() if v} == {("q1", "g1"), ("q1", "x1"), ("q1", "x3"), ("q2", "y2"),
                                                   ("q2", "y4"), ("q3", "z3")}
    assert len(majority) == 4 + 5 + 4  # judged pairs of complete assignments: q1 4, q2 5, q3 4
    code = main(["humaneval", "export", "--study", str(constructed_study.path), "--out", str(tmp_path / "q")])
    assert code == 0
    lines = (tmp_path / "q" / "qrels.trec").read_text().splitlines()
    assert len(lines) == 13 and "q1 0 g1 1" in lines and "q1 0 x1 0" in lines


def test_report_command_writes_every_table(constructed_study, tmp_path, capsys):
    out = tmp_path / "report"
    code = main(["humaneval", "report", "--study", str(constructed_study.path), "--out", str(out)])
    assert code == 0
    assert {p.name for p in out.iterdir()} >= {"report.md", "table2.csv", "table11.csv", "table12.csv", "agreement.csv",
                                               "per_annotation.csv", "per_query.csv", "preferences.csv",
                                               "humaneval.png", "manifest.json"}
    t2 = pd.read_csv(out / "table2.csv")
    assert _row(t2, "all", "base")["MRR"] == pytest.approx(100 * 1.25 / 3, abs=1e-3)
    text = (out / "report.md").read_text()
    assert "| Specify (2) |" in text and "| All (3) |" in text and "**100.0**" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["complete"] == 4 and len(manifest["study"]["sha256"]) == 64
    assert (out / "humaneval.png").stat().st_size > 1000


def test_report_on_a_study_without_answers_fails_clearly(tmp_path, capsys):
    content = StudyContent(meta={"depth": 3}, systems=[{"system": "a", "position": 0, "run_path": "-", "run_sha256": "-"},
                                                       {"system": "b", "position": 1, "run_path": "-", "run_sha256": "-"}],
                           queries=[], candidates=[], lists=[], accounts=[], assignments=[])
    Study.create(tmp_path / "empty.sqlite", content)
    code = main(["humaneval", "report", "--study", str(tmp_path / "empty.sqlite"), "--out", str(tmp_path / "r")])
    assert code == 2 and "no complete assignment yet" in capsys.readouterr().err
    assert main(["humaneval", "report", "--study", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path / "r")]) == 2
    assert "no study at" in capsys.readouterr().err
    (tmp_path / "notes.sqlite").write_text("not a database\n" * 100)
    assert main(["humaneval", "export", "--study", str(tmp_path / "notes.sqlite"), "--out", str(tmp_path / "q")]) == 2
    assert "is not a database" in capsys.readouterr().err
