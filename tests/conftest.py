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
