"""Whole real corpora in each shape: nothing crashes and every input record is a paper or a reject."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratio_spark.config import load_config
from ratio_spark.pipeline.runner import run_stage

from conftest import REPO_ROOT


@pytest.mark.slow
def test_all_250_aclsum_papers_in_the_s2orc_2020_shape(spark, tmp_path):
    import aclsum

    folder = Path(aclsum.__file__).parent / "dataset" / "paper_jsons"
    n_files = len(list(folder.glob("*.json")))
    config = load_config(
        REPO_ROOT / "conf" / "aclsum.yaml", [f"inputs.0.path={folder}", f"tables.root={tmp_path / 'tables'}"]
    )
    summary = run_stage(spark, config, "ingest")
    assert summary["input_records"] == n_files == 250
    assert summary["papers"] + summary["dropped"] == n_files
    assert summary["papers"] >= 240  # real, well-formed papers: only a handful may be unusable
    assert set(summary["papers_by_date_source"]) <= {"anthology_id", "year"}
