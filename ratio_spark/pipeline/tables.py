"""Delta tables: the contract between stages. Writes overwrite atomically, so reruns are idempotent."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from ratio_spark.core.config import Config
from ratio_spark.core.errors import TableNotFoundError

def table_location(config: Config, name: str) -> str:
    return config.tables.location(name)


def write_table(df: DataFrame, location: str, partition_by: list[str] | None = None) -> None:
    """Replace the table's content in one Delta commit: a killed run leaves the previous version intact."""
    writer = df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(location)


def read_table(spark: SparkSession, config: Config, name: str) -> DataFrame:
    location = table_location(config, name)
    try:
        return spark.read.format("delta").load(location)
    except Exception as exc:  # AnalysisException: not a Delta table / path missing
        raise TableNotFoundError(
            f"table {name!r} not found at {location}: run the stage that writes it first ({exc.__class__.__name__})"
        ) from None
