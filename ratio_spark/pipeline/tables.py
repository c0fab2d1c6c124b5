"""Delta tables between stages: writes replace a table (or one partition) in one commit, so reruns are
idempotent; ``drop_rows`` is the shape of a stage's drops (the ``drops`` table, ``core.schema.TABLES``)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ratio_spark.core.errors import MissingTableError
from ratio_spark.pipeline.settings import PipelineConfig


def table_location(config: PipelineConfig, name: str) -> str:
    return config.tables.location(name)


def write_table(df: DataFrame, location: str, partition_by: list[str] | tuple[str, ...] = (),
                replace_where: str | None = None) -> None:
    """Replace the table's content (or, with ``replace_where``, the rows of one partition) in one Delta
    commit: a killed run leaves the previous version intact."""
    writer = df.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if replace_where:
        writer = writer.option("replaceWhere", replace_where)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(location)


def in_predicate(column: str, values: list[str] | tuple[str, ...]) -> str:
    """``column IN ('a', 'b')`` for a Delta ``replaceWhere`` (``false`` for no values: replaces nothing)."""
    if not values:
        return "false"
    return f"{column} IN (" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + ")"


def read_table(spark: SparkSession, config: PipelineConfig, name: str) -> DataFrame:
    location = table_location(config, name)
    try:
        return spark.read.format("delta").load(location)
    except Exception as exc:  # AnalysisException: not a Delta table / path missing
        raise MissingTableError(
            f"table {name!r} not found at {location}: run the stage that writes it first ({exc.__class__.__name__})"
        ) from None


def drop_rows(rows: DataFrame, reason: Column | str, item_id: Column | str, *, split: Column | str | None = None,
              role: Column | str | None = None, text: Column | str | None = None,
              detail: Column | str | None = None) -> DataFrame:
    """Rows a stage removes, in the shape ``StageIO.write_drops`` takes (the ``drops`` table without
    ``stage`` and ``item``). ``reason`` is a code (or a column of codes); the others name columns of
    ``rows`` or are columns; what is not given is null."""

    def column(value: Column | str | None) -> Column:
        if value is None:
            return F.lit(None).cast("string")
        return value if isinstance(value, Column) else F.col(value)

    return rows.select(
        (reason if isinstance(reason, Column) else F.lit(reason)).alias("reason"),
        column(item_id).alias("item_id"),
        F.col("paper_id"),
        column(split).alias("split"),
        column(role).alias("role"),
        column(text).alias("text"),
        column(detail).cast("string").alias("detail"),
    )
