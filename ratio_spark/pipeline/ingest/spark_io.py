"""Run the pure-Python readers over Spark in Arrow batches (``mapInArrow``), losing nothing.

Two layouts of input:
- one record per file (TEI, ``*.json``): ``binaryFile`` gives (path, bytes); tar archives
  (``*.tar``, ``*.tar.gz``, ``*.tgz``) are opened and each member is one record.
- one record per line (``*.jsonl``, ``*.jsonl.gz``, ``*.ndjson``): the text source splits lines in
  the JVM; the raw bytes of each line (``value`` cast to binary) reach the reader, so undecodable
  bytes are detected exactly rather than silently replaced.
"""

from __future__ import annotations

import gzip
import importlib
import io
import re
import tarfile
from typing import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.core.schema import Reason
from ratio_spark.pipeline.ingest.records import RECORD_COLUMNS, RECORD_SCHEMA, ParsedRecord, reject

# format -> "module:function" of its parser(data: bytes, source_path: str, options) -> list[ParsedRecord]
PARSERS = {
    "tei": "ratio_spark.pipeline.ingest.tei:parse_tei",
    "s2orc_2020": "ratio_spark.pipeline.ingest.s2orc:parse_s2orc_2020",
    "s2orc_current": "ratio_spark.pipeline.ingest.s2orc:parse_s2orc_current",
    "jsonl": "ratio_spark.pipeline.ingest.jsonl:parse_jsonl",
}
LINE_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")

Parser = Callable[[bytes, str, ReaderOptions], list[ParsedRecord]]


def load_parser(fmt: str) -> Parser:
    module, func = PARSERS[fmt].split(":")
    return getattr(importlib.import_module(module), func)


def _safe_parse(parser: Parser, data: bytes, path: str, options: ReaderOptions) -> list[ParsedRecord]:
    """A reader bug on one record becomes a reject with the exception, never a failed job."""
    if options.exclude_path_regex and re.search(options.exclude_path_regex, path):
        return [reject(options.format, path, Reason.EXCLUDED_BY_PATH_RULE,
                       f"path matches exclude_path_regex {options.exclude_path_regex!r}")]
    try:
        records = parser(data, path, options)
    except Exception as exc:  # noqa: BLE001 - the whole point is to keep the job alive
        return [reject(options.format, path, Reason.UNEXPECTED_SHAPE, f"{type(exc).__name__}: {exc}")]
    return records or [reject(options.format, path, Reason.UNEXPECTED_SHAPE, "the reader returned nothing")]


def _expand_file(path: str, content: bytes) -> Iterator[tuple[str, bytes | None, str | None]]:
    """Yield (record path, bytes, error) for a file: gunzip, or open a tar archive member by member."""
    lower = path.lower()
    try:
        if lower.endswith(ARCHIVE_SUFFIXES):
            with tarfile.open(fileobj=io.BytesIO(content), mode="r:*") as archive:
                for member in archive:
                    if member.isfile():
                        handle = archive.extractfile(member)
                        data = handle.read() if handle else b""
                        if member.name.lower().endswith(".gz"):
                            data = gzip.decompress(data)
                        yield f"{path}!{member.name}", data, None
            return
        if lower.endswith(".gz"):
            yield path, gzip.decompress(content), None
            return
    except (OSError, EOFError, tarfile.TarError) as exc:
        yield path, None, f"{type(exc).__name__}: {exc}"
        return
    yield path, content, None


def _records_to_batch(records: list[ParsedRecord], schema: pa.Schema) -> pa.RecordBatch:
    rows = [{c: r.get(c) for c in RECORD_COLUMNS} for r in records]
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def _file_mapper(options: ReaderOptions):
    arrow_schema = to_arrow_schema(RECORD_SCHEMA)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parser = load_parser(options.format)
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content").to_pylist()
            out: list[ParsedRecord] = []
            for path, content in zip(paths, contents):
                for record_path, data, error in _expand_file(path, content or b""):
                    if error is not None:
                        out.append(reject(options.format, record_path, Reason.UNREADABLE_FILE, error))
                    else:
                        out.extend(_safe_parse(parser, data, record_path, options))
            if out:
                yield _records_to_batch(out, arrow_schema)

    return run


def _line_mapper(options: ReaderOptions):
    arrow_schema = to_arrow_schema(RECORD_SCHEMA)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parser = load_parser(options.format)
        for batch in batches:
            out: list[ParsedRecord] = []
            for path, line_key, data in zip(
                batch.column("path").to_pylist(), batch.column("line_key").to_pylist(), batch.column("raw").to_pylist()
            ):
                out.extend(_safe_parse(parser, data or b"", f"{path}#line-{line_key}", options))
            if out:
                yield _records_to_batch(out, arrow_schema)

    return run


def find_empty_files(spark: SparkSession, path: str) -> list[str]:
    """Zero-length files under ``path``: Spark's file sources skip them, so we list them ourselves."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    empty: list[str] = []
    for status in fs.globStatus(hadoop_path) or []:
        if status.isFile():
            if status.getLen() == 0:
                empty.append(status.getPath().toString())
            continue
        files = fs.listFiles(status.getPath(), True)
        while files.hasNext():
            found = files.next()
            name = found.getPath().getName()
            if found.getLen() == 0 and not name.startswith((".", "_")):
                empty.append(found.getPath().toString())
    return empty


def read_records(spark: SparkSession, path: str, options: ReaderOptions) -> DataFrame:
    """Every input unit under ``path`` as records of ``RECORD_SCHEMA`` (papers and rejects)."""
    files = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(path).select("path")
    line_paths = [r.path for r in files.filter(_is_line_file(F.col("path"))).collect()]
    frames: list[DataFrame] = []
    per_file = (
        spark.read.format("binaryFile")
        .option("recursiveFileLookup", "true")
        .load(path)
        .filter(~_is_line_file(F.col("path")))
        .select("path", "content")
    )
    frames.append(per_file.mapInArrow(_file_mapper(options), RECORD_SCHEMA))
    if line_paths:
        lines = (
            spark.read.text(line_paths)
            .select(
                # input_file_name() spells local paths file:///x; binaryFile spells them file:/x.
                F.regexp_replace(F.input_file_name(), "^file:///", "file:/").alias("path"),
                F.col("value").cast("binary").alias("raw"),
            )
            .filter(F.length(F.trim(F.col("raw").cast("string"))) > 0)  # blank lines are not records
        )
        # Lines have no number in a distributed read; a content hash names each one stably.
        lines = lines.withColumn("line_key", F.lpad(F.lower(F.hex(F.xxhash64("raw"))), 16, "0"))
        frames.append(lines.mapInArrow(_line_mapper(options), RECORD_SCHEMA))
    empty = find_empty_files(spark, path)
    if empty:
        rows = [reject(options.format, p, Reason.EMPTY_FILE, "the file has no content") for p in empty]
        frames.append(spark.createDataFrame([[r.get(c) for c in RECORD_COLUMNS] for r in rows], RECORD_SCHEMA))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _is_line_file(path_col):
    lower = F.lower(path_col)
    condition = F.lit(False)
    for suffix in LINE_SUFFIXES:
        condition = condition | lower.endswith(suffix)
    return condition
