"""Run the pure-Python readers over Spark in Arrow batches (``mapInArrow``), losing nothing.

Three layouts of input:
- one record per file (TEI, ``*.json``, optionally ``.gz`` / ``.bz2`` / ``.xz``): ``binaryFile`` gives
  (path, bytes); tar archives (``*.tar``, ``*.tar.gz``, ``*.tgz``, ...) are opened and each member is one record.
- one record per line of a plain file (``*.jsonl``, ``*.ndjson``): Spark's text source splits the file
  across tasks; the raw bytes of each line (``value`` cast to binary) reach the reader, so undecodable bytes
  are detected exactly rather than silently replaced.
- one record per line of a compressed file (``*.jsonl.gz``, ``.bz2``, ``.xz``): read whole by one task (a
  compressed stream cannot be split anyway) and decompressed here as a stream, so that damage is caught where
  it is: the complete lines before it are kept, and one reject names the file and the damage.

A file that is damaged or not what its name says (a truncated ``.gz``, a ``.gz`` that is not gzip, a tar
archive cut short, a damaged member) becomes a reject (``truncated_file`` / ``unreadable_file``), never a
failed job: Hadoop's codecs would throw in the middle of the job, and Spark's ``ignoreCorruptFiles`` would
drop the rest of the file without a word. Every reject and kept record is counted in ``input_records``.
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import io
import lzma
import math
import re
import tarfile
import zlib
from typing import IO, Callable, Iterator
from urllib.parse import unquote

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
    "jats": "ratio_spark.pipeline.ingest.jats:parse_jats",
    "s2orc_2020": "ratio_spark.pipeline.ingest.s2orc:parse_s2orc_2020",
    "s2orc_current": "ratio_spark.pipeline.ingest.s2orc:parse_s2orc_current",
    "jsonl": "ratio_spark.pipeline.ingest.jsonl:parse_jsonl",
}
# Compression by file suffix: how to open a stream of it, and its name for messages.
COMPRESSIONS: dict[str, tuple[Callable[[IO[bytes]], IO[bytes]], str]] = {
    ".gz": (lambda raw: gzip.GzipFile(fileobj=raw), "gzip"),
    ".bz2": (lambda raw: bz2.BZ2File(raw), "bzip2"),
    ".xz": (lambda raw: lzma.LZMAFile(raw), "xz"),
}
# The first bytes of each compression's stream: a file named .gz without them is not gzip at all.
MAGIC_NUMBERS = {".gz": b"\x1f\x8b", ".bz2": b"BZh", ".xz": b"\xfd7zXZ\x00"}
# Compressions Python cannot read without extra packages: a clear reject instead of garbage records.
UNSUPPORTED_COMPRESSIONS = (".zst", ".zstd", ".lz4", ".sz", ".snappy", ".br", ".7z", ".zip", ".rar")
PLAIN_LINE_SUFFIXES = (".jsonl", ".ndjson")
LINE_SUFFIXES = PLAIN_LINE_SUFFIXES + tuple(s + c for s in PLAIN_LINE_SUFFIXES for c in COMPRESSIONS)
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
# Spark's binaryFile hands a file to Python in one piece and cannot above 2 GiB (a JVM array).
MAX_FILE_BYTES = 2**31 - 1
RECORDS_PER_BATCH = 512  # a compressed line file can hold 100,000s of papers: hand them back in slices
# Files handed to one Python task at least: a task costs ~70 ms to start, a TEI file ~7 ms to parse, and Spark's
# scan packs only ~31 small files into a partition (its 4 MB open cost per file): 3x the tasks' parse time
# went to starting them (docs/performance.md, "Ingest").
FILES_PER_PYTHON_TASK = 256

Parser = Callable[[bytes, str, ReaderOptions], list[ParsedRecord]]
_FILE_URI = re.compile(r"^file:///")  # a local file's URI, as Spark's inputFiles spells it


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


def _suffix(path: str, suffixes) -> str | None:
    lower = path.lower()
    return next((s for s in suffixes if lower.endswith(s)), None)


def _damage(options: ReaderOptions, path: str, what: str, exc: BaseException, kept: str) -> ParsedRecord:
    """One reject naming the file and the damage; ``kept`` says what was read before it."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, EOFError) or "unexpected end of data" in message or "truncated" in message:
        reason, detail = Reason.TRUNCATED_FILE, f"{what} ends before its end (truncated: {message})"
    else:
        reason, detail = Reason.UNREADABLE_FILE, f"{what} is damaged or not what its name says ({type(exc).__name__}: {message})"
    return reject(options.format, path, reason, f"{detail}; {kept}; fix: copy or download the file again")


def _not_compressed(options: ReaderOptions, path: str, compression: str, content: bytes, kept: str) -> ParsedRecord | None:
    """A reject when ``content`` lacks the magic number of the compression its name says: most likely a plain
    file named ``.gz`` (renaming it is the fix), not a damaged download."""
    magic = MAGIC_NUMBERS[compression]
    if content.startswith(magic):
        return None
    name = COMPRESSIONS[compression][1]
    head = content[:8]
    return reject(options.format, path, Reason.UNREADABLE_FILE,
                  f"the file is named {compression} but is not {name}, not what its name says: its first bytes are "
                  f"{head.hex(' ')} ({head!r}), not {name}'s magic number {magic.hex(' ')}; {kept}; fix: if it is not "
                  f"compressed, rename it without {compression} (or compress it); if it should be {name}, copy or "
                  "download it again")


_DECOMPRESS_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


def _decompressed(path: str, content: bytes) -> tuple[bytes | None, BaseException | None]:
    """The whole content of a compressed per-file input (or the content itself); the error when it fails."""
    compression = _suffix(path, COMPRESSIONS)
    if compression is None:
        return content, None
    try:
        with COMPRESSIONS[compression][0](io.BytesIO(content)) as stream:
            return stream.read(), None
    except _DECOMPRESS_ERRORS as exc:
        return None, exc


def _archive_records(path: str, content: bytes, parser: Parser, options: ReaderOptions) -> Iterator[ParsedRecord]:
    """One record per member; a damaged member is rejected alone, a damaged archive after its good members."""
    members = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(content), mode="r:*") as archive:
            for member in archive:
                if not member.isfile():
                    continue
                handle = archive.extractfile(member)
                data = handle.read() if handle else b""
                record_path = f"{path}!{member.name}"
                data, error = _decompressed(member.name, data)
                if error is not None:
                    yield _damage(options, record_path, "the member", error, "the other members are read")
                else:
                    yield from _safe_parse(parser, data, record_path, options)
                members += 1
            # tarfile stops quietly when the archive ends at a member boundary: a complete archive ends
            # with zero blocks, so anything else there means it was cut short (or damaged in a header).
            archive.fileobj.seek(archive.offset)
            end = archive.fileobj.read(tarfile.BLOCKSIZE)
            if len(end) < tarfile.BLOCKSIZE or end.count(0) != tarfile.BLOCKSIZE:
                raise tarfile.ReadError("unexpected end of data: no end-of-archive block after the last member"
                                        if len(end) < tarfile.BLOCKSIZE else "a damaged member header")
    except (tarfile.TarError, *_DECOMPRESS_ERRORS) as exc:
        yield _damage(options, path, "the tar archive", exc, f"the {members} member(s) before the damage are read")
        return
    if members == 0:  # a complete archive without a file is still an input: one record says so
        yield reject(options.format, path, Reason.EMPTY_FILE, "the tar archive holds no file")


def _line_records(path: str, content: bytes, compression: str, parser: Parser,
                  options: ReaderOptions) -> Iterator[ParsedRecord]:
    """One record per non-blank line of a compressed line file, read as a stream up to any damage."""
    opener, name = COMPRESSIONS[compression]
    if (wrong := _not_compressed(options, path, compression, content, "nothing is read from it")) is not None:
        yield wrong
        return
    line_no = lines = 0
    try:
        with opener(io.BytesIO(content)) as stream:
            for line_no, line in enumerate(stream, start=1):
                if line.strip():
                    lines += 1
                    yield from _safe_parse(parser, line.rstrip(b"\r\n"), f"{path}#line-{line_no}", options)
    except _DECOMPRESS_ERRORS as exc:
        yield _damage(options, path, f"the {name} stream", exc,
                      f"the {line_no} complete line(s) before the damage are read ({lines} not blank)")
        return
    if lines == 0:
        yield reject(options.format, path, Reason.EMPTY_FILE, f"the {name} stream holds no line with content")


def file_records(path: str, content: bytes, parser: Parser, options: ReaderOptions) -> Iterator[ParsedRecord]:
    """Every record of one file read whole: a line file, an archive, or one record (see the module docstring)."""
    unsupported = _suffix(path, UNSUPPORTED_COMPRESSIONS)
    if unsupported is not None:
        yield reject(options.format, path, Reason.UNSUPPORTED_COMPRESSION,
                     f"{unsupported} files cannot be read here; recompress as .gz (or .bz2, .xz) or decompress it")
        return
    line_compression = _suffix(path, [s + c for s in PLAIN_LINE_SUFFIXES for c in COMPRESSIONS])
    if line_compression is not None:
        yield from _line_records(path, content, line_compression[line_compression.rindex("."):], parser, options)
        return
    if _suffix(path, ARCHIVE_SUFFIXES) is not None:
        yield from _archive_records(path, content, parser, options)
        return
    kept = "it holds one record, so nothing is read from it"
    compression = _suffix(path, COMPRESSIONS)
    if compression is not None and (wrong := _not_compressed(options, path, compression, content, kept)) is not None:
        yield wrong
        return
    data, error = _decompressed(path, content)
    if error is not None:
        yield _damage(options, path, "the file", error, kept)
        return
    yield from _safe_parse(parser, data, path, options)


def _batches(records: Iterator[ParsedRecord], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    rows: list[dict] = []
    for record in records:
        rows.append({c: record.get(c) for c in RECORD_COLUMNS})
        if len(rows) >= RECORDS_PER_BATCH:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)
            rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def _file_mapper(options: ReaderOptions):
    arrow_schema = to_arrow_schema(RECORD_SCHEMA)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parser = load_parser(options.format)

        def records() -> Iterator[ParsedRecord]:
            for batch in batches:
                for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
                    yield from file_records(path, content or b"", parser, options)

        yield from _batches(records(), arrow_schema)

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
                yield from _batches(iter(out), arrow_schema)

    return run


def empty_file_rejects(spark: SparkSession, listing: DataFrame, listed_uris: list[str], source_format: str) -> DataFrame:
    """A reject row for every zero-length file of ``listing`` (a ``binaryFile`` read). Spark's file index lists
    them (``listed_uris``: its ``inputFiles``, one call) but its scans skip them, so they are the listed files the
    scan does not return, found by a Spark join; walking the files one by one through py4j cost the driver 3-4 ms a file."""
    # inputFiles spells a path as a URI (file:///a%20b), the scan's path column as Hadoop's Path (file:/a b).
    listed = spark.createDataFrame([(unquote(_FILE_URI.sub("file:/", uri)),) for uri in listed_uris], "path string")
    empty = listed.join(listing.select("path"), "path", "left_anti")
    values = {"source_format": F.lit(source_format), "source_path": F.col("path"),
              "reject_reason": F.lit(Reason.EMPTY_FILE), "reject_detail": F.lit("the file has no content")}
    return empty.select(*[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in RECORD_SCHEMA.fields])


def _rejects_frame(spark: SparkSession, rows: list[ParsedRecord]) -> DataFrame:
    return spark.createDataFrame([[r.get(c) for c in RECORD_COLUMNS] for r in rows], RECORD_SCHEMA)


def read_records(spark: SparkSession, path: str, options: ReaderOptions) -> DataFrame:
    """Every input unit under ``path`` as records of ``RECORD_SCHEMA`` (papers and rejects)."""
    listing = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(path)
    plain_lines = _has_suffix(F.col("path"), PLAIN_LINE_SUFFIXES)
    too_large = F.col("length") > MAX_FILE_BYTES
    # One listing job (no content is read): the plain line files, and the files too large to read whole.
    special = listing.filter(plain_lines | too_large).select("path", "length").collect()
    line_paths = [r.path for r in special if r.path.lower().endswith(PLAIN_LINE_SUFFIXES)]
    large = [reject(options.format, r.path, Reason.FILE_TOO_LARGE,
                    f"{r.length / 2**30:.1f} GiB: Spark hands a file to Python whole, up to 2 GiB; split it into parts "
                    "(a line file: e.g. zcat F | split -l 100000 --filter 'gzip > $FILE.jsonl.gz' - part-)")
             for r in special if r.length > MAX_FILE_BYTES and not r.path.lower().endswith(PLAIN_LINE_SUFFIXES)]
    # The length filter is applied before the content is read (binaryFile pushes it down).
    per_file = listing.filter(~plain_lines & ~too_large).select("path", "content")
    listed_uris = listing.inputFiles()
    tasks = max(2 * spark.sparkContext.defaultParallelism, math.ceil(len(listed_uris) / FILES_PER_PYTHON_TASK))
    frames: list[DataFrame] = [per_file.coalesce(tasks).mapInArrow(_file_mapper(options), RECORD_SCHEMA)]
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
    frames.append(empty_file_rejects(spark, listing, listed_uris, options.format))
    if large:
        frames.append(_rejects_frame(spark, large))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _has_suffix(path_col, suffixes):
    lower = F.lower(path_col)
    condition = F.lit(False)
    for suffix in suffixes:
        condition = condition | lower.endswith(suffix)
    return condition
