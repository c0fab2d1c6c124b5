"""Build the Spark session (Delta Lake, and Spark NLP when asked) from the configuration: one function, every platform."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from ratio_spark.core.errors import UserError
from ratio_spark.pipeline.class_archive import archive_path, java_options, with_java_options
from ratio_spark.pipeline.jars import COMPONENTS, ensure_jars, profile_folder
from ratio_spark.pipeline.settings import SparkConfig

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
    # Let adaptive execution coalesce the partitions of a persisted plan too (a stage's small persisted
    # frames, e.g. mine's matched pairs, otherwise keep spark.sql.shuffle.partitions tasks and files).
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}


# The throughput collector for a local session's JVM (driver and executor): the stages are batch work on every core,
# where it took 4-6% less wall and CPU time than the default G1 (docs/performance.md, "Scale"). Added to the
# configuration's own JVM options unless they choose a collector.
LOCAL_GC_OPTION = "-XX:+UseParallelGC"


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


def _check_submitted_jars(config: SparkConfig, submitted: dict[str, str], spark_nlp: bool) -> None:
    """Under spark-submit the driver runs before this code, so jars or packages set now never reach its class
    path: they must be on the spark-submit command line (or provided by the cluster)."""
    given = submitted.get("spark.jars", "") + "," + submitted.get("spark.jars.packages", "")
    artifacts = [coordinate.split(":")[1] for coordinate in config.jars.packages_for(spark_nlp)]
    if all(artifact in given for artifact in artifacts):
        return
    engine = " --set segment.engine=sparknlp" if spark_nlp else ""
    how = {"local": f'spark-submit --jars "$(ratio-spark jars --comma{engine})"',
           "packages": f"spark-submit --packages {','.join(config.jars.packages_for(spark_nlp))}"}[config.jars.mode]
    what = "Delta Lake and Spark NLP jars (segment.engine: sparknlp)" if spark_nlp else "Delta Lake jars"
    raise UserError(f"spark-submit started the driver before ratio-spark could add the {what} "
                    f"(spark.jars.mode: {config.jars.mode}): pass them on its command line ({how} ...), or set "
                    "spark.jars.mode to provided when the cluster has them")


def class_archive(config: SparkConfig, jars: list[Path]) -> Path | None:
    """The class archive of a local session with ``jars`` on its class path, when ``ratio-spark jars
    --class-archive`` wrote one (it writes Delta Lake's: a Spark NLP session has none and starts without it) and
    ``spark.class_archive`` is on; None also when the configuration's JVM options name an archive of their own."""
    own = config.conf.get("spark.driver.extraJavaOptions", "")
    if not config.class_archive or "SharedArchiveFile" in own or "ArchiveClassesAtExit" in own:
        return None
    archive = archive_path(jars, profile_folder(config.jars.profile, config.jars.cache_dir))
    return archive if archive is not None and archive.exists() else None


def build_spark_session(config: SparkConfig, spark_nlp: bool = False) -> SparkSession:
    """Return a SparkSession with Delta Lake, and with Spark NLP when ``spark_nlp`` (only the segment stage with
    ``segment.engine: sparknlp`` needs it: ``jars.components``), as ``config`` describes."""
    builder = SparkSession.builder.appName(config.app_name)
    settings: dict[str, str] = {}
    archive = None
    local = bool(config.master and config.master.startswith("local"))
    if config.master:
        builder = builder.master(config.master)
        if local:
            _prepare_local_environment()
            settings.update(_LOCAL_DEFAULTS)
    settings.update(_DELTA_CONF)
    settings["spark.ui.showConsoleProgress"] = str(sys.stderr.isatty()).lower()  # no carriage-return bar in a log file
    submitted = _submitted_conf() if config.jars.mode != "provided" else None
    if submitted is not None:
        _check_submitted_jars(config, submitted, spark_nlp)
    elif config.jars.mode == "local":
        wanted = COMPONENTS if spark_nlp else ("delta",)
        jar_files = ensure_jars(config.jars.profile, config.jars.cache_dir, wanted=wanted)
        jars = [str(j) for j in jar_files]
        if local:
            # One JVM is driver and executor: the jars go on its class path. spark.jars would also copy
            # all of them into the executor's work folder before the first task of every run.
            settings["spark.driver.extraClassPath"] = os.pathsep.join(jars)
            archive = class_archive(config, jar_files)
        else:
            settings["spark.jars"] = ",".join(jars)
    elif config.jars.mode == "packages":
        settings["spark.jars.packages"] = ",".join(config.jars.packages_for(spark_nlp))
    settings.update(config.conf)
    if local and not re.search(r"-XX:[+-]Use\w+GC", settings.get("spark.driver.extraJavaOptions", "")):
        settings = with_java_options(settings, LOCAL_GC_OPTION)
    if archive is not None:
        settings = with_java_options(settings, java_options(archive))
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.log_level)
    return spark


def has_spark_nlp(spark: SparkSession) -> bool:
    """Whether Spark NLP's classes are on this session's class path (the session was built with ``spark_nlp``)."""
    from py4j.java_gateway import JavaClass

    # py4j answers a class it cannot load with a JavaPackage of that name (the way sparknlp itself loads them).
    return isinstance(spark.sparkContext._jvm.com.johnsnowlabs.nlp.DocumentAssembler, JavaClass)


def start_and_exit(work: str, config_json: str) -> None:
    """What every Spark command does (a session, a Delta write, a read, a count), then the JVM's exit, waited for:
    the child process in which ``class_archive.build_archive`` has the JVM write the classes it loaded."""
    from pyspark import SparkContext

    spark = build_spark_session(SparkConfig.model_validate_json(config_json))
    table = os.path.join(work, "table")
    spark.range(1000).selectExpr("id", "cast(id as string) as text").write.format("delta").save(table)
    spark.read.format("delta").load(table).filter("id % 2 = 0").groupBy().count().collect()
    spark.read.format("delta").load(table).count()
    spark.stop()
    gateway = SparkContext._gateway
    gateway.shutdown()
    gateway.proc.stdin.close()  # the JVM exits at the end of its input, and writes the archive as it exits
    gateway.proc.wait(timeout=300)
