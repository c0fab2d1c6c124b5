"""Build the Spark session (Delta Lake + Spark NLP) from the configuration: one function, every platform."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from ratio_spark.core.config import SparkConfig
from ratio_spark.pipeline.jars import ensure_jars

_DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
_LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "4g",
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryoserializer.buffer.max": "512m",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def _prepare_local_environment() -> None:
    # Executors must run the same Python as the driver (the project's venv), and local mode must
    # bind to loopback on machines whose hostname does not resolve.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def build_spark_session(config: SparkConfig) -> SparkSession:
    """Return a SparkSession with Delta Lake and Spark NLP available, as ``config`` describes."""
    builder = SparkSession.builder.appName(config.app_name)
    settings: dict[str, str] = {}
    if config.master:
        builder = builder.master(config.master)
        if config.master.startswith("local"):
            _prepare_local_environment()
            settings.update(_LOCAL_DEFAULTS)
    settings.update(_DELTA_CONF)
    if config.jars.mode == "local":
        jars = ensure_jars(config.jars.profile, config.jars.cache_dir)
        settings["spark.jars"] = ",".join(str(j) for j in jars)
    elif config.jars.mode == "packages":
        settings["spark.jars.packages"] = ",".join(config.jars.packages)
    settings.update(config.conf)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.log_level)
    return spark
