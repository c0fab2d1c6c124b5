"""``ratio-spark humaneval assign``: a blind, stratified study from two real runs, assignment rules, errors."""

from __future__ import annotations

import collections
import math
import sqlite3
import stat

import pandas as pd
import pytest
from deltalake import DeltaTable

from ratio_spark.cli.main import main
from ratio_spark.humaneval.assign import Annotator, deal
from ratio_spark.humaneval.study import Study
from ratio_spark.silver.pairs import load_pairs
from ratio_spark.silver.sampling import sample_pairs


def _trec(folder) -> dict[str, list[str]]:
    ranked = collections.defaultdict(list)
    for file in sorted(folder.glob("*.trec")):
        for line in file.read_text().splitlines():
            qid, _, cid, rank, _, _ = line.split()
            ranked[qid].append((int(rank), cid))
    return {q: [c for _, c in sorted(items)] for q, items in ranked.items()}


def _assign(humaneval_runs, out, *extra) -> int:
    runs = humaneval_runs["runs"]
    return main(["humaneval", "assign", "--set", f"tables.root={humaneval_runs['tables']}",
                 "--system", f"unigram={runs['unigram']}", "--system", f"bigram={runs['bigram']}", "--out", str(out), *extra])


def test_assign_builds_a_blind_stratified_study(humaneval_runs, tmp_path, capsys):
    out = tmp_path / "study.sqlite"
    assert _assign(humaneval_runs, out, "--annotators", "alice,bob,carol", "--per-move", "4", "--overlap", "0.5") == 0
    printed = capsys.readouterr().out
    frames = Study(out).frames()
    queries = frames["queries"]

    tables = humaneval_runs["tables"]
    available = DeltaTable(str(tables / "queries")).to_pandas().groupby("move").size()
    assert queries.groupby("move").size().to_dict() == {m: min(4, n) for m, n in available.items()}
    location = lambda name: str(tables / name)  # noqa: E731
    expected = sample_pairs(load_pairs(location, "test"), {m: 4 for m in available.index}, seed=17,
                            stratify_by="marker_entry").pairs
    assert set(queries["query_id"]) == set(expected["query_id"])  # the silver sampler, equal allocation by marker

    runs = {name: _trec(folder) for name, folder in humaneval_runs["runs"].items()}
    for (qid, system), group in frames["lists"].groupby(["query_id", "system"]):
        assert group.sort_values("rank")["candidate_id"].tolist() == runs[system][qid][:10]
    assert set(zip(queries["system_a"], queries["system_b"])) == {("unigram", "bigram"), ("bigram", "unigram")}

    # what people read: the pool's text as written (case kept), not the lowercased text the retrievers saw
    pool = DeltaTable(str(tables / "candidates")).to_pandas().set_index("candidate_id")
    shown = frames["candidates"].set_index("candidate_id")
    assert (shown["text"] == pool.loc[shown.index, "text_original"]).all()

    assignments = frames["assignments"]
    per_query = assignments.groupby("query_id")["annotator"].agg(list)
    doubled = per_query[per_query.map(len) == 2]
    assert len(per_query) == len(queries) and per_query.map(len).max() == 2
    assert all(len(set(names)) == 2 for names in doubled)
    assert len(doubled) == sum(math.ceil(0.5 * n) for n in queries.groupby("move").size())
    loads = assignments.groupby("annotator").size()
    assert loads.max() - loads.min() <= 1 and set(loads.index) == {"alice", "bob", "carol"}
    for _, mine in assignments.groupby("annotator"):
        assert sorted(mine["position"]) == list(range(1, len(mine) + 1))
    assert f"assignments                    {len(assignments)}" in printed

    links = out.with_suffix(".links.tsv")
    assert stat.S_IMODE(links.stat().st_mode) == 0o600
    tokens = dict(line.split("\t") for line in links.read_text().splitlines()[1:])
    assert set(tokens) == {"alice", "bob", "carol", "admin"}
    study = Study(out)
    for name, path in tokens.items():
        token = path.removeprefix("/t/")
        assert study.authenticate(token).name == name
        assert token.encode() not in out.read_bytes()  # only digests are stored
    assert study.authenticate("not-a-token") is None and study.authenticate("") is None


def test_assign_never_overwrites_a_study(humaneval_runs, tmp_path, capsys):
    out = tmp_path / "study.sqlite"
    assert _assign(humaneval_runs, out, "--annotators", "alice", "--per-move", "1") == 0
    with sqlite3.connect(out) as conn:
        conn.execute("INSERT INTO labels SELECT assignment_id, candidate_id, 1, 'now' FROM assignments "
                     "JOIN lists USING (query_id) LIMIT 1")
    capsys.readouterr()
    assert _assign(humaneval_runs, out, "--annotators", "alice", "--per-move", "1") == 2
    assert "never overwritten" in capsys.readouterr().err
    assert len(Study(out).frames()["labels"]) == 1


def test_assign_by_subfield(humaneval_runs, tmp_path, capsys):
    queries = DeltaTable(str(humaneval_runs["tables"] / "queries")).to_pandas()
    papers = sorted(queries["paper_id"].unique())
    subfield = {p: ("parsing" if i % 3 == 0 else "mt" if i % 3 == 1 else "dialogue") for i, p in enumerate(papers)}
    pd.DataFrame({"paper_id": list(subfield), "subfield": list(subfield.values())}).to_csv(tmp_path / "sub.csv", index=False)
    pd.DataFrame({"annotator": ["ana", "ben", "cem"], "subfields": ["parsing", "mt;parsing", "mt"]}).to_csv(
        tmp_path / "people.csv", index=False)
    out = tmp_path / "study.sqlite"
    assert _assign(humaneval_runs, out, "--annotators", str(tmp_path / "people.csv"), "--assignment", "subfield",
                   "--subfields", str(tmp_path / "sub.csv"), "--per-move", "50", "--overlap", "1") == 0
    printed = capsys.readouterr().out
    frames = Study(out).frames()
    uncovered = int(queries["paper_id"].map(subfield).eq("dialogue").sum())
    assert f"no_annotator_for_subfield      {uncovered}" in printed
    assert len(frames["queries"]) == len(queries) - uncovered
    skills = {"ana": {"parsing"}, "ben": {"mt", "parsing"}, "cem": {"mt"}}
    merged = frames["assignments"].merge(frames["queries"], on="query_id")
    assert all(row.subfield in skills[row.annotator] for row in merged.itertuples())
    # overlap 1: every query gets a second annotator, and each subfield has two annotators here
    assert (merged.groupby("query_id").size() == 2).all()


def test_deal_balances_moves_and_doubles():
    queries = pd.DataFrame({"query_id": [f"q{i}" for i in range(30)], "move": ["specify"] * 20 + ["address"] * 10,
                            "subfield": None})
    people = [Annotator("a"), Annotator("b"), Annotator("c"), Annotator("d")]
    rows, counts = deal(queries, people, mode="round_robin", overlap=0.25, seed=3)
    frame = pd.DataFrame(rows)
    assert counts["queries_labelled_twice"] == math.ceil(0.25 * 20) + math.ceil(0.25 * 10)
    assert len(frame) == 30 + counts["queries_labelled_twice"] and not frame.duplicated(["annotator", "query_id"]).any()
    loads = frame.groupby("annotator").size()
    assert loads.max() - loads.min() <= 1
    by_move = frame.merge(queries, on="query_id").groupby(["move", "annotator"]).size().unstack()
    assert (by_move.max(axis=1) - by_move.min(axis=1) <= 2).all()  # every annotator gets a share of every move
    again, _ = deal(queries, people, mode="round_robin", overlap=0.25, seed=3)
    assert again == rows


@pytest.mark.parametrize("case", ["missing_run", "foreign_candidate", "bad_line", "one_system"])
def test_assign_errors_are_one_line(humaneval_runs, tmp_path, capsys, case):
    runs = humaneval_runs["runs"]
    bad = tmp_path / "bad.trec"
    systems = ["--system", f"unigram={runs['unigram']}", "--system", f"other={bad}"]
    if case == "missing_run":
        systems[-1] = f"other={tmp_path / 'nowhere'}"
        message = "no file or folder at"
    elif case == "foreign_candidate":
        qid = next(iter(_trec(runs["unigram"])))
        bad.write_text(f"{qid} Q0 c0000000000000000 1 3.5 x\n")
        message = "not in the test pool"
    elif case == "bad_line":
        bad.write_text("q1 Q0 c1 first 1.0 x\n")
        message = "bad.trec:1: not a TREC run line"
    else:
        systems = systems[:2]
        message = "exactly two --system"
    code = main(["humaneval", "assign", "--set", f"tables.root={humaneval_runs['tables']}", *systems,
                 "--annotators", "alice", "--out", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "s.sqlite").exists()
