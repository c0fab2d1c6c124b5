"""Build the Spark session (Delta Lake + Spark NLP) from the configuration: one function, every platform."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from ratio_spark.core.config import SparkConfig
from ratio_spark.core.errors import UserError
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


def _submitted_conf() -> dict[str, str] | None:
    """The settings spark-submit started the driver with; None when this process is not under spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, so SparkConf() sees its settings
    return dict(SparkConf().getAll())


def _check_submitted_jars(config: SparkConfig, submitted: dict[str, str]) -> None:
    """Under spark-submit the driver runs before this code, so jars or packages set now never reach its class
    path: they must be on the spark-submit command line (or provided by the cluster)."""
    given = submitted.get("spark.jars", "") + "," + submitted.get("spark.jars.packages", "")
    artifacts = [coordinate.split(":")[1] for coordinate in config.jars.packages]
    if all(artifact in given for artifact in artifacts):
        return
    how = {"local": 'spark-submit --jars "$(ratio-spark jars --comma)"',
           "packages": f"spark-submit --packages {','.join(config.jars.packages)}"}[config.jars.mode]
    raise UserError(f"spark-submit started the driver before ratio-spark could add the Delta Lake and Spark NLP jars "
                    f"(spark.jars.mode: {config.jars.mode}): pass them on its command line ({how} ...), or set "
                    "spark.jars.mode to provided when the cluster has them")


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
    submitted = _submitted_conf() if config.jars.mode != "provided" else None
    if submitted is not None:
        _check_submitted_jars(config, submitted)
    elif config.jars.mode == "local":
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
