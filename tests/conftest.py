"""A real local Spark session (Delta Lake + Spark NLP jars) shared by the whole test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from prerequisites import missing
from ratio_spark.core.config import load_config

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def spark():
    from ratio_spark.pipeline.session import build_spark_session

    session = build_spark_session(load_config(None, ["spark.conf.spark.sql.shuffle.partitions=4"]).spark)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def llm_server():
    """A real llama.cpp server with gemma 3 270M on 127.0.0.1 (ratio_spark.llm.local_server)."""
    from ratio_spark.llm.local_server import LocalLlamaServer, llama_cpp_available

    if not llama_cpp_available():
        missing("llama-cpp-python is not installed (scripts/setup.sh builds the wheel once and installs it)")
    server = LocalLlamaServer()
    server.start()
    yield server
    server.stop()


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


@pytest.fixture(scope="session")
def silver_tables(tmp_path_factory):
    """Delta ``queries`` and ``candidates`` with 72 real test pairs of the sample (tests/fixtures/silver),
    written with deltalake (no Spark). Returns the tables root."""
    import datetime as dt
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    root = tmp_path_factory.mktemp("silver-tables")
    for name in ("queries", "candidates"):
        rows = [json.loads(line) for line in (FIXTURES / "silver" / f"{name}.jsonl").read_text().splitlines()]
        for row in rows:
            row["pub_date"] = dt.date.fromisoformat(row["pub_date"]) if row.get("pub_date") else None
        write_deltalake(str(root / name), pa.Table.from_pylist(rows), partition_by=["split"])
    return root


# --- human evaluation (issue 17): real sample queries, a pool with their golds, two real BM25 runs ---
@pytest.fixture(scope="session")
def humaneval_runs(tmp_path_factory) -> dict:
    """Delta ``queries`` (the 72 test queries of tests/fixtures/silver, with markers) and ``candidates`` (the
    test pools of tests/fixtures/eval and /silver, 407 sentences), and the BM25-unigram and BM25-bigram runs
    that ``ratio-spark evaluate`` writes for them. Returns {"tables": root, "runs": {name: run folder}}."""
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    from ratio_spark.cli.main import main

    root = tmp_path_factory.mktemp("humaneval")

    def rows(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    queries = [r for r in rows(FIXTURES / "silver" / "queries.jsonl") if r["split"] == "test"]
    pool: dict[str, dict] = {}
    for row in rows(EVAL_FIXTURE / "candidates.jsonl") + rows(FIXTURES / "silver" / "candidates.jsonl"):
        if row["split"] == "test":
            pool.setdefault(row["candidate_id"], row)
    for name, data in (("queries", queries), ("candidates", list(pool.values()))):
        write_deltalake(str(root / "tables" / name), pa.Table.from_pylist(data), partition_by=["split"])
    results = root / "results"
    code = main(["evaluate", "--set", f"tables.root={root / 'tables'}", "--split", "test", "--retrievers",
                 "bm25-1,bm25-2", "--analyses", "none", "--results", str(results), "--no-progress"])
    assert code == 0
    return {"tables": root / "tables", "runs": {"unigram": results / "runs" / "bm25-1", "bigram": results / "runs" / "bm25-2"}}
