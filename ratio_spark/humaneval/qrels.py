"""The candidate-level labels as reusable relevance judgments: TREC qrels plus every raw label.

``qrels.trec`` has one line ``query_id 0 candidate_id relevance`` per judged (query, candidate), from
complete assignments only (the analyses' rule). Where several annotators judged a candidate, ``aggregate``
decides: ``majority`` (relevant when more than half marked it useful; a tie is not relevant), ``any`` or
``all``. ``labels.csv`` keeps every label of every assignment, complete or not, with the annotator, the
candidate's rank in each system's list and whether it is the gold, so other rules can be applied later.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

AGGREGATES = ("majority", "any", "all")


def label_rows(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Every label, one row each, with the context needed to reuse it."""
    assignments = frames["assignments"][["assignment_id", "annotator", "query_id", "completed_at"]]
    queries = frames["queries"][["query_id", "move", "gold_candidate_id", "paper_id"]].rename(
        columns={"paper_id": "query_paper_id"})
    ranks = frames["lists"].pivot_table(index=["query_id", "candidate_id"], columns="system", values="rank").astype("Int64")
    ranks.columns = [f"rank_{system}" for system in ranks.columns]
    rows = (frames["labels"].merge(assignments, on="assignment_id", validate="many_to_one")
            .merge(queries, on="query_id", validate="many_to_one")
            .merge(ranks.reset_index(), on=["query_id", "candidate_id"], how="left", validate="many_to_one")
            .merge(frames["candidates"][["candidate_id", "paper_id"]].rename(columns={"paper_id": "candidate_paper_id"}),
                   on="candidate_id", how="left", validate="many_to_one"))
    rows["complete"] = rows["completed_at"].notna()
    rows["is_gold"] = rows["candidate_id"] == rows["gold_candidate_id"]
    columns = ["query_id", "move", "candidate_id", "annotator", "useful", "complete", "is_gold", *ranks.columns,
               "query_paper_id", "candidate_paper_id", "labelled_at", "assignment_id"]
    return rows[columns].sort_values(["query_id", "candidate_id", "annotator"]).reset_index(drop=True)


def qrels(labels: pd.DataFrame, aggregate: str = "majority") -> pd.DataFrame:
    """One relevance per judged (query, candidate) from the complete assignments' labels."""
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES} (got {aggregate!r})")
    votes = (labels[labels["complete"]].groupby(["query_id", "candidate_id"])["useful"]
             .agg(useful="sum", judged="count").reset_index())
    rule = {"majority": votes["useful"] * 2 > votes["judged"], "any": votes["useful"] > 0,
            "all": votes["useful"] == votes["judged"]}[aggregate]
    return votes.assign(relevance=rule.astype(int))


def write_qrels(frames: dict[str, pd.DataFrame], out: str | Path, aggregate: str = "majority") -> dict:
    """Write ``qrels.trec`` and ``labels.csv`` into ``out``; returns counts."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labels = label_rows(frames)
    judged = qrels(labels, aggregate)
    with (out / "qrels.trec").open("w", encoding="utf-8") as handle:
        for row in judged.itertuples(index=False):
            handle.write(f"{row.query_id} 0 {row.candidate_id} {row.relevance}\n")
    labels.to_csv(out / "labels.csv", index=False)
    return {"labels": len(labels), "labels_in_complete_assignments": int(labels["complete"].sum()),
            "judged_pairs": len(judged), "relevant_pairs": int(judged["relevance"].sum()),
            "queries": int(judged["query_id"].nunique()), "aggregate": aggregate,
            "qrels": str(out / "qrels.trec"), "labels_csv": str(out / "labels.csv")}
