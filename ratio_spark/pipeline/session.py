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


def _jars_given_to_spark_submit(config: SparkConfig) -> bool | None:
    """Under spark-submit the driver JVM runs before this code, so jars added now never reach its class
    path: they must come with ``--jars``. True/False: were they given; None: not under spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, so SparkConf() sees its settings
    submitted = SparkConf().get("spark.jars", "") or ""
    artifacts = [coordinate.split(":")[1] for coordinate in config.jars.packages]
    return all(artifact in submitted for artifact in artifacts)


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
        submitted = _jars_given_to_spark_submit(config)
        if submitted is False:
            raise UserError(
                "spark-submit started the driver before ratio-spark could add the Delta Lake and Spark NLP jars "
                "(spark.jars.mode: local): pass them with spark-submit --jars \"$(ratio-spark jars --comma)\", "
                "or set spark.jars.mode to packages (Spark fetches them) or provided (the cluster has them)"
            )
        if submitted is None:
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
