"""Query–gold pairs as the judge and the annotators see them, read from the Delta tables (no JVM).

The judge sees ``query. Marker, gold`` (the paper's appendix E): the query sentence as written, the
marker as matched, and the gold sentence as written without its marker. ``queries`` holds the query and
the marker; the gold text comes from the split's ``candidates`` row named by ``gold_candidate_id``.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from ratio_spark.evaluation.tables import read_table
from ratio_spark.core.errors import UserError

PAIR_COLUMNS = [
    "query_id", "split", "move", "marker", "marker_entry", "pair_id", "paper_id",
    "query_text_original", "gold_text_original", "gold_candidate_id",
]

_TERMINAL = (".", "?", "!", ":", ";")


class PairsError(UserError, ValueError):
    """The tables needed for the silver set are inconsistent (a missing table raises ``DeltaTableMissing``)."""


def _split_rows(location: str, name: str, columns: list[str], split: str | None) -> pd.DataFrame:
    return read_table(location, name, columns, [("split", "=", split)] if split else None).to_pandas()


def load_pairs(location: Callable[[str], str], split: str | None) -> pd.DataFrame:
    """Every query of ``split`` (all splits when None) with its gold sentence, one row per query_id."""
    queries = _split_rows(
        location("queries"), "queries",
        ["split", "move", "query_id", "query_text_original", "gold_candidate_id", "marker", "marker_entry",
         "paper_id", "pair_id"],
        split,
    )
    if queries.empty:
        raise PairsError(f"table queries at {location('queries')} has no rows for split {split!r}")
    candidates = _split_rows(location("candidates"), "candidates", ["split", "candidate_id", "text_original"], split)
    golds = candidates.rename(columns={"candidate_id": "gold_candidate_id", "text_original": "gold_text_original"})
    pairs = queries.merge(golds, on=["split", "gold_candidate_id"], how="left", validate="many_to_one")
    missing = pairs["gold_text_original"].isna()
    if missing.any():
        example = pairs.loc[missing, "query_id"].iloc[0]
        raise PairsError(
            f"{int(missing.sum())} queries name a gold candidate that is not in the pool (e.g. {example}); "
            "queries and candidates come from different pool runs"
        )
    return pairs[PAIR_COLUMNS].sort_values("query_id", kind="stable").reset_index(drop=True)


def judge_text(query: str, marker: str, gold: str) -> str:
    """``query. Marker, gold``: the two sentences joined as in the paper, the marker capitalised."""
    query = " ".join(query.split())
    if not query.endswith(_TERMINAL):
        query += "."
    marker = " ".join(marker.split())
    marker = marker[:1].upper() + marker[1:]
    gold = " ".join(gold.split())
    return f"{query} {marker}, {gold}"
