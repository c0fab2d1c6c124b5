"""The ``silver`` Delta table, written with ``deltalake`` (no JVM).

One row per sampled pair of a split: its verdicts from every selected prompt, the AND rule's outcome
(``accepted``) and what produced it (judge model, prompt ids and their text hashes, sampling seed).
Only pairs with ``accepted = true`` are silver queries. A rejected pair is left out of the queries, but
its gold sentence stays in the split's candidate pool (the ``candidates`` table is not touched), as in the
paper. A rerun replaces the split's rows in one commit (partition ``split``); other splits stay.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from ratio_spark.core.delta import is_delta_table
from ratio_spark.evaluation.tables import read_table

VERDICT_TYPE = pa.struct([
    ("prompt_id", pa.string()),
    ("prompt_sha256", pa.string()),
    ("accept", pa.bool_()),
    ("reason", pa.string()),
    ("error", pa.string()),
    ("cached", pa.bool_()),
])

SILVER_SCHEMA = pa.schema([
    ("split", pa.string()),
    ("query_id", pa.string()),
    ("move", pa.string()),
    ("marker", pa.string()),
    ("marker_entry", pa.string()),
    ("pair_id", pa.string()),
    ("status", pa.string()),  # accepted / rejected / failed (a request failed; rerun to retry)
    ("accepted", pa.bool_()),  # the AND rule; null when status = failed
    ("verdicts", pa.list_(VERDICT_TYPE)),  # in the order of silver.prompts.<move>
    ("prompt_ids", pa.list_(pa.string())),
    ("judge_model", pa.string()),  # the endpoint name in the llm: section
    ("judge_model_id", pa.string()),  # the model id the server was asked for
    ("sample_seed", pa.int64()),
    ("sample_stratum", pa.string()),
])


def silver_rows(
    sample: pd.DataFrame, verdicts: pd.DataFrame, outcome: pd.DataFrame, *, model: str, model_id: str, seed: int
) -> pa.Table:
    """Join the sample, its verdicts (long) and the AND outcome into the table's rows."""
    per_pair: dict[str, list[dict]] = {}
    for v in verdicts.sort_values(["query_id", "position"]).itertuples(index=False):
        per_pair.setdefault(v.query_id, []).append({
            "prompt_id": v.prompt_id, "prompt_sha256": v.prompt_sha256,
            "accept": None if pd.isna(v.accept) else bool(v.accept),
            "reason": None if pd.isna(v.reason) else str(v.reason),
            "error": None if pd.isna(v.error) else str(v.error), "cached": bool(v.cached),
        })
    outcome_by_id = outcome.set_index("query_id")
    lost = sorted(set(sample["query_id"]) - set(per_pair))
    if lost:
        raise ValueError(f"{len(lost)} sampled pairs have no verdict (e.g. {lost[0]})")
    records = []
    for pair in sample.sort_values("query_id").itertuples(index=False):
        status = outcome_by_id.at[pair.query_id, "status"]
        records.append({
            "split": pair.split, "query_id": pair.query_id, "move": pair.move, "marker": pair.marker,
            "marker_entry": pair.marker_entry, "pair_id": pair.pair_id, "status": status,
            "accepted": {"accepted": True, "rejected": False}.get(status),
            "verdicts": per_pair[pair.query_id],
            "prompt_ids": [v["prompt_id"] for v in per_pair[pair.query_id]],
            "judge_model": model, "judge_model_id": model_id, "sample_seed": int(seed),
            "sample_stratum": pair.stratum,
        })
    return pa.Table.from_pylist(records, schema=SILVER_SCHEMA)


def write_silver(table: pa.Table, location: str) -> None:
    """Replace the rows of the table's split(s) in one commit; create the table on first write."""
    from deltalake import write_deltalake

    splits = sorted(set(table.column("split").to_pylist()))
    if not splits:
        raise ValueError("nothing to write: the silver rows are empty")
    if is_delta_table(location):
        predicate = " OR ".join(f"split = '{s}'" for s in splits)
        write_deltalake(location, table, mode="overwrite", predicate=predicate, partition_by=["split"])
    else:
        write_deltalake(location, table, mode="overwrite", partition_by=["split"])


def read_silver(location: str, split: str | None = None) -> pd.DataFrame:
    """Every column of the silver table (one ``split`` of it when given), for the silver tools; the evaluation's
    query filter reads three columns of it (``evaluation.data.silver_verdicts``), both through ``read_table``."""
    return read_table(location, "silver", filters=[("split", "=", split)] if split else None).to_pandas()
