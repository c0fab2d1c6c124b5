"""Consecutive sentence pairs formed where the sentences are read, without a shuffle.

``segment`` writes each paragraph's sentences one after the other, in order (one task writes a paper's rows,
in reading order), so a scan meets sentence i+1 right after sentence i. ``PairStream`` walks the Arrow
batches of one Spark partition in that order and forms the pairs whose two sentences (and the one before,
the pair's context) it met next to each other within one *block* (a file split: the rows Spark read as one
contiguous piece of one file). Everything else is reported, never guessed:

* a **head**: a sentence past its paragraph's first (``sent_idx > 0``) that does not follow its predecessor
  in the block. The pairs whose second sentence is the head or the one after it (the latter's context is the
  head's predecessor) are left out here; ``ratio_spark.pipeline.mine`` forms them with the window of
  ``pairs.consecutive_pairs`` from the edges or, failing that, from the paper's sentences read again;
* an **edge**: each of the first two and last two sentences of a run of one block: where a paragraph runs
  on across a split, its missing predecessor and context are among them.

In a table ``segment`` wrote, the heads are the paragraphs cut by a split; a table in another order (a user's
own, one rewritten by Z-ordering) has heads everywhere, and mine then forms every pair with the shuffle.
The batches come from Spark's scan (a block is a file split) or from ``file_batches``, the Python workers
reading the table's Parquet files themselves (a block is a piece of a file).
This module only imports pyarrow and numpy: the Python workers run it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# A paragraph: pairs never cross one (``pairs.consecutive_pairs`` windows over it too).
PARAGRAPH_KEY = ("paper_id", "section_idx", "para_idx")
# What the scan gives each sentence.
SENTENCE_FIELDS = ("sentence_id", "paper_id", "pub_date", "section_idx", "para_idx", "sent_idx", "text", "norm_text",
                   "norm_flag", "year")
# What ``file_batches`` reads of a file (``year`` it derives from ``pub_date``).
FILE_COLUMNS = tuple(c for c in SENTENCE_FIELDS if c != "year")
# Added to each sentence before the stream: whether a marker may open it (the pre-filter, in Python), and a hash
# of the file split it was read from (by the JVM), or the index of the file's piece (``file_batches``).
OPENS, BLOCK = "_opens", "_block"
# A pair as mining reads it (``mine.pairs_for_mining``'s columns).
PAIR_FIELDS = ("paper_id", "pub_date", "query_sentence_id", "query_original", "query_norm", "query_flag",
               "context_text", "gold_sentence_id", "second_original", "second_norm", "second_flag")


def _same(column: pa.Array) -> np.ndarray:
    """Row i (from 1) equals row i-1, nulls never equal."""
    return np.asarray(pc.fill_null(pc.equal(column.slice(1), column.slice(0, len(column) - 1)), False))


class PairStream:
    """The pairs of one partition's sentence batches, in the order read (the module docstring).

    ``feed`` each batch, then ``finish``; each returns ``(pairs, counts, edges, heads)``: ``pairs``, a table of
    ``PAIR_FIELDS`` (plus ``year``) for the complete pairs whose second sentence passes the pre-filter;
    ``counts``, year -> complete pairs (every one, the pre-filter aside); ``edges``, a table of sentences
    (``SENTENCE_FIELDS``, perhaps one twice); ``heads``, a table of the heads' paragraph key, ``sent_idx`` and
    ``at_block_start`` (whether it opens a run of its block: if not, the table is out of order there).
    """

    def __init__(self) -> None:
        self.carry: pa.Table | None = None  # the stream's last two rows
        self.seen = 0  # rows fed so far

    def feed(self, batch: pa.RecordBatch | pa.Table) -> tuple[pa.Table, dict, pa.Table, pa.Table]:
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        k = 0 if self.carry is None else self.carry.num_rows
        work = (table if k == 0 else pa.concat_tables([self.carry, table.select(self.carry.column_names)])).combine_chunks()
        n, first = work.num_rows, self.seen - k  # ``first``: the stream position of work's row 0
        self.seen += table.num_rows
        if table.num_rows == 0:
            return self._empty(work)
        sent = np.asarray(pc.fill_null(work.column("sent_idx"), -1), dtype=np.int64)
        block = np.asarray(pc.fill_null(work.column(BLOCK), 0), dtype=np.int64)
        same_paragraph = np.ones(n - 1, dtype=bool)
        for name in PARAGRAPH_KEY:
            same_paragraph &= _same(work.column(name))
        same_block = block[1:] == block[:-1]
        # adjacent[i]: row i follows its predecessor i-1 in the same paragraph and block.
        adjacent = np.zeros(n, dtype=bool)
        adjacent[1:] = same_paragraph & same_block & (sent[1:] == sent[:-1] + 1) & (sent[:-1] >= 0)
        # complete[i]: the pair (i-1, i) and its context (i-2, or none when i-1 opens the paragraph) are here.
        complete = np.zeros(n, dtype=bool)
        complete[1:] = adjacent[1:] & ((sent[:-1] == 0) | adjacent[:-1])
        new = np.arange(n) >= k
        position = first + np.arange(n)
        run_start = np.ones(n, dtype=bool)  # the row opens a run of its block in this partition
        run_start[1:] = ~same_block
        pairs_here = complete & new

        counts: dict = {}
        if pairs_here.any():
            years = work.column("year").filter(pa.array(pairs_here))
            for row in years.value_counts().to_pylist():
                counts[row["values"]] = counts.get(row["values"], 0) + row["counts"]

        candidates = np.flatnonzero(pairs_here & np.asarray(pc.fill_null(work.column(OPENS), False)))
        pairs = self._pairs(work, candidates, sent)

        is_head = new & (sent > 0) & ~adjacent
        heads = pa.table({
            **{name: work.column(name).take(pa.array(np.flatnonzero(is_head))) for name in (*PARAGRAPH_KEY, "sent_idx")},
            "at_block_start": pa.array(run_start[is_head]),
        })

        # Edges: the new rows among the first two of a run, and the rows (carried ones included) among the
        # last two of a run whose next two rows are here; the stream's last two are carried: the next batch
        # or ``finish`` decides them.
        opens_run = position < 2
        opens_run[1:] |= ~same_block
        opens_run[2:] |= ~same_block[:-1]
        closes_run = np.zeros(n, dtype=bool)
        if n >= 3:
            closes_run[: n - 2] = ~same_block[: n - 2] | ~same_block[1: n - 1]
        edge = (new & opens_run) | closes_run
        edges = work.select(list(SENTENCE_FIELDS)).filter(pa.array(edge))

        self.carry = work.slice(max(n - 2, 0))
        return pairs, counts, edges, heads

    def finish(self) -> tuple[pa.Table, dict, pa.Table, pa.Table]:
        """The partition's last two rows are edges (a paragraph may run on in the next split)."""
        if self.carry is None:
            return self._empty(None)
        pairs, counts, _, heads = self._empty(self.carry)
        return pairs, counts, self.carry.select(list(SENTENCE_FIELDS)), heads

    def _pairs(self, work: pa.Table, seconds: np.ndarray, sent: np.ndarray) -> pa.Table:
        """The pairs (i-1, i) for the rows ``seconds``, with their context (i-2 where i-1 is past the first)."""
        second = pa.array(seconds, pa.int64())
        query = pa.array(seconds - 1, pa.int64())
        has_context = sent[seconds - 1] > 0 if len(seconds) else np.zeros(0, dtype=bool)
        context = pa.array(np.where(has_context, seconds - 2, 0), pa.int64(), mask=~has_context)
        sources = {"paper_id": ("paper_id", second), "pub_date": ("pub_date", second),
                   "query_sentence_id": ("sentence_id", query), "query_original": ("text", query),
                   "query_norm": ("norm_text", query), "query_flag": ("norm_flag", query),
                   "context_text": ("norm_text", context), "gold_sentence_id": ("sentence_id", second),
                   "second_original": ("text", second), "second_norm": ("norm_text", second),
                   "second_flag": ("norm_flag", second), "year": ("year", second)}
        return pa.table({name: work.column(column).take(rows) for name, (column, rows) in sources.items()})

    def _empty(self, work: pa.Table | None) -> tuple[pa.Table, dict, pa.Table, pa.Table]:
        if work is None:
            return pa.table({}), {}, pa.table({}), pa.table({})
        nothing = np.zeros(0, dtype=np.int64)
        heads = pa.table({**{name: work.column(name).take(pa.array(nothing)) for name in (*PARAGRAPH_KEY, "sent_idx")},
                          "at_block_start": pa.array([], pa.bool_())})
        return self._pairs(work, nothing, np.zeros(0, dtype=np.int64)), {}, work.select(list(SENTENCE_FIELDS)).slice(0, 0), heads


def _middle(row_group) -> int:
    """The byte offset of the middle of a Parquet row group: the piece of a file that holds it reads it (Spark's
    rule, so that each row group is read once)."""
    first = row_group.column(0)
    opens = first.dictionary_page_offset if first.has_dictionary_page else first.data_page_offset
    return opens + sum(row_group.column(i).total_compressed_size for i in range(row_group.num_columns)) // 2


def file_batches(pieces: list[tuple[str, int, int]], ids: Iterator[pa.RecordBatch], batch_rows: int = 10_000
                 ) -> Iterator[pa.RecordBatch]:
    """The sentences of ``pieces[i]`` (a Parquet file's URI and a byte range: the row groups whose middle is in
    it) for each ``i`` of the ``id`` column of ``ids``, read with pyarrow in the file's order, each piece one
    block: ``SENTENCE_FIELDS`` and ``BLOCK`` (= ``i``), as Spark's scan gives them. Why: reading and converting
    every sentence for the Python workers took the JVM more CPU than the pass's Python work
    (docs/performance.md, "Mining: the Python workers read the files")."""
    import pyarrow.fs
    import pyarrow.parquet as pq

    for unit in ids:
        for i in unit.column("id").to_pylist():
            uri, start, end = pieces[i]
            try:
                filesystem, path = pyarrow.fs.FileSystem.from_uri(uri)
                with filesystem.open_input_file(path) as handle:
                    parquet = pq.ParquetFile(handle)
                    groups = [k for k in range(parquet.metadata.num_row_groups)
                              if start <= _middle(parquet.metadata.row_group(k)) < end]
                    batches = parquet.iter_batches(batch_size=batch_rows, row_groups=groups, columns=list(FILE_COLUMNS))
                    for batch in batches if groups else ():  # (pyarrow refuses an empty list of row groups)
                        year = pc.year(batch.column("pub_date")).cast(pa.int32())
                        block = pa.array(np.full(batch.num_rows, i, dtype=np.int64))
                        yield pa.RecordBatch.from_arrays([*batch.columns, year, block], names=[*FILE_COLUMNS, "year", BLOCK])
            except (OSError, pa.ArrowException) as exc:  # the file, named (the driver's error line reads it)
                detail = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
                raise ValueError(f"cannot read the Parquet file {uri}: {detail}") from exc


def stream_partition(batches: Iterator[pa.RecordBatch], emit: Callable[[pa.Table, dict, pa.Table, pa.Table], Iterator]
                     ) -> Iterator:
    """``PairStream`` over one partition's batches: ``emit`` turns each step's outputs into what to yield."""
    stream = PairStream()
    for batch in batches:
        yield from emit(*stream.feed(batch))
    yield from emit(*stream.finish())
