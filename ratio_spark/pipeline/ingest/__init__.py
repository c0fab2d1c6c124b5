"""Ingest: corpora in GROBID TEI, S2ORC JSON or our JSONL into the ``papers`` and ``rejects`` tables."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ratio_spark.core.config import ConfigError
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.core.schema import TABLES, Reason
from ratio_spark.pipeline.ingest.spark_io import read_records
from ratio_spark.pipeline.settings import PipelineConfig

INPUT_ORDER = "_input_order"  # position of the input in the configuration: earlier inputs win duplicates


@dataclass
class IngestResult:
    records: DataFrame  # everything the readers produced, before de-duplication
    papers: DataFrame
    rejects: DataFrame


def read_all_inputs(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    if not config.inputs:
        raise ConfigError("the configuration has no inputs: add at least one under `inputs:`")
    frames = []
    for index, inp in enumerate(config.inputs):
        options = ReaderOptions.from_config(inp, config.ingest)
        if inp.format == "s2orc_current":
            from ratio_spark.pipeline.ingest.s2orc import read_s2orc_current

            frame = read_s2orc_current(spark, inp, options)
        else:
            frame = read_records(spark, inp.path, options)
        frames.append(frame.withColumn(INPUT_ORDER, F.lit(index)))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def split_duplicates(accepted: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Keep one record per paper id, deterministically (the earlier input, then the path); reject the others."""
    order = Window.partitionBy("paper_id").orderBy(INPUT_ORDER, "source_path")
    ranked = accepted.withColumn("_rank", F.row_number().over(order)).withColumn(
        "_kept_path", F.first("source_path").over(order)
    )
    kept = ranked.filter(F.col("_rank") == 1).drop("_rank", "_kept_path", INPUT_ORDER)
    dupes = ranked.filter(F.col("_rank") > 1).select(
        "source_path",
        "source_format",
        "paper_id",
        F.lit(Reason.DUPLICATE_PAPER_ID).alias("reason"),
        F.concat(F.lit("paper id already taken by "), F.col("_kept_path")).alias("detail"),
    )
    return kept, dupes


def ingest(spark: SparkSession, config: PipelineConfig) -> IngestResult:
    records = read_all_inputs(spark, config)
    accepted = records.filter(F.col("reject_reason").isNull())
    papers, duplicates = split_duplicates(accepted)
    rejects = records.filter(F.col("reject_reason").isNotNull()).select(
        "source_path", "source_format", "paper_id",
        F.col("reject_reason").alias("reason"), F.col("reject_detail").alias("detail"),
    ).unionByName(duplicates)
    return IngestResult(records=records, papers=papers.select(*TABLES["papers"].column_names),
                        rejects=rejects.select(*TABLES["rejects"].column_names))
