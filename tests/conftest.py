"""A real local Spark session (Delta Lake + Spark NLP jars) shared by the whole test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratio_spark.config import load_config

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def spark():
    from ratio_spark.session import build_spark_session

    session = build_spark_session(load_config(None, ["spark.conf.spark.sql.shuffle.partitions=4"]).spark)
    yield session
    session.stop()


# --- evaluation (issue 5): a small slice of the sample's real queries and pools as Delta tables, no Spark ---
EVAL_FIXTURE = FIXTURES / "eval"


def write_eval_tables(root: Path) -> Path:
    """Write tests/fixtures/eval/{queries,candidates}.jsonl as Delta tables partitioned by split."""
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    for name in ("queries", "candidates"):
        rows = [json.loads(line) for line in (EVAL_FIXTURE / f"{name}.jsonl").read_text().splitlines() if line.strip()]
        write_deltalake(str(root / name), pa.Table.from_pylist(rows), partition_by=["split"], mode="overwrite")
    return root


@pytest.fixture(scope="session")
def eval_tables(tmp_path_factory) -> Path:
    """A tables root with `queries` and `candidates` (test: 72 queries, 378 candidates; validation: 8, 39)."""
    return write_eval_tables(tmp_path_factory.mktemp("eval-tables"))
