"""The Python half's one Delta reader (``ratio_spark.core.delta``): right rows, clear errors, and no abort
at interpreter exit, which deltalake's own scan causes (shown here in subprocesses)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from ratio_spark.core.delta import DeltaColumnsMissing, DeltaTableMissing, read_delta

SPLITS = {"train": 5, "test": 3}
COMMITS = 40  # many small files: a scan still has read-ahead in flight when the script ends


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    location = tmp_path_factory.mktemp("delta") / "candidates"
    for commit in range(COMMITS):
        rows = [{"split": split, "candidate_id": f"c{commit}-{split}-{i}", "text": f"sentence {i}"}
                for split, n in SPLITS.items() for i in range(n)]
        write_deltalake(str(location), pa.Table.from_pylist(rows), partition_by=["split"], mode="append")
    return location


def test_reads_columns_of_one_partition(table):
    test = read_delta(table, ["candidate_id", "split"], [("split", "=", "test")])
    assert test.num_rows == COMMITS * SPLITS["test"] and set(test["split"].to_pylist()) == {"test"}
    assert read_delta(table).num_rows == COMMITS * sum(SPLITS.values())


def test_missing_tables_and_columns_are_one_clear_error(table, tmp_path):
    with pytest.raises(DeltaTableMissing, match="no Delta table at .*nothing: run `x` first"):
        read_delta(tmp_path / "nothing", missing_hint="run `x` first")
    with pytest.raises(DeltaColumnsMissing, match=r"lacks column\(s\) \['gold_moves'\]"):
        read_delta(table, ["candidate_id", "gold_moves"])


def test_a_table_read_names_the_command_that_writes_it(table, tmp_path):
    """evaluation.tables.read_table: the Python half's one read of a tables root; what to run when a table or
    a column is missing comes from the stage contracts (or the Python half's own writers), and the version read
    is recorded for a manifest."""
    from ratio_spark.evaluation.tables import read_table

    with pytest.raises(DeltaTableMissing, match="no Delta table at .*mined_pairs: run `ratio-spark mine` first"):
        read_table(tmp_path / "mined_pairs", "mined_pairs")
    with pytest.raises(DeltaTableMissing, match="run `ratio-spark silver build` first"):
        read_table(tmp_path / "silver", "silver")
    with pytest.raises(DeltaColumnsMissing, match=r"lacks column\(s\) \['gold_moves'\]: rerun `ratio-spark pools`"):
        read_table(table, "candidates", ["candidate_id", "gold_moves"])
    inputs: dict = {}
    rows = read_table(table, "candidates", ["candidate_id"], [("split", "=", "train")], inputs=inputs, role="pool")
    assert rows.num_rows == COMMITS * SPLITS["train"] and inputs["table:pool"]["version"] == COMMITS - 1


def test_the_python_half_reads_delta_tables_one_way():
    """No module but core/delta.py and evaluation/tables.py calls read_delta: every read names its writer."""
    import ratio_spark
    from pathlib import Path

    root = Path(ratio_spark.__file__).parent
    readers = {p.relative_to(root).as_posix() for p in root.rglob("*.py") if "read_delta(" in p.read_text()}
    assert readers == {"core/delta.py", "evaluation/tables.py"}


def _exit_codes(code: str, runs: int = 3) -> list[int]:
    return [subprocess.run([sys.executable, "-c", code], capture_output=True).returncode for _ in range(runs)]


@pytest.mark.slow
def test_deltalakes_own_scan_aborts_at_exit_and_ours_does_not(table):
    # The condition: a scan with batches still being read when the interpreter exits. Through deltalake's
    # Rust filesystem the process dies (SIGABRT "terminate called without an active exception", or SIGSEGV).
    # If this first assertion ever fails, deltalake has fixed it and core/delta.py's workaround can go.
    theirs = f"from deltalake import DeltaTable\nnext(DeltaTable({str(table)!r}).to_pyarrow_dataset().to_batches())\n"
    assert any(code < 0 or code in (134, 139) for code in _exit_codes(theirs))
    ours = (f"from ratio_spark.core.delta import delta_dataset, read_delta\n"
            f"next(delta_dataset({str(table)!r}).to_batches())\n"
            f"assert read_delta({str(table)!r}, ['text'], [('split', '=', 'test')]).num_rows == {COMMITS * 3}\n")
    assert _exit_codes(ours) == [0, 0, 0]
