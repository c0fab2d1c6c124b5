"""Load one split of the benchmark for evaluation: its queries per move, their gold ids, the split's whole
shared pool, and each query's ``exclude_candidate_ids`` (its own sentence, when the pool holds it).

Plain Python (``deltalake`` + pyarrow), no JVM. Two sources hold the same rows:

* the Delta tables ``queries`` and ``candidates`` (``docs/tables.md``), read partition-pruned
  (``ratio_spark.core.delta``);
* the release export (``<release>/parquet/<split>/{queries,candidates}`` or ``<release>/jsonl/<split>/*.jsonl``).

``queries="silver"`` keeps only the queries that the LLM judge accepted: it joins the Delta table ``silver``
(``query_id``, ``move``, ``accepted``) on ``query_id`` and keeps ``accepted = true``; the pool stays whole,
as in the paper (rejected pairs keep their gold in the pool).

The pool is sorted by ``candidate_id``, so a pool index order *is* the id order; retrievers break score
ties by index, which is the deterministic "candidate id ascending" rule of ``ratio_spark.evaluation.metrics``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ratio_spark.core.delta import is_delta_table
from ratio_spark.core.errors import UserError
from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.evaluation.manifest import files_entry
from ratio_spark.evaluation.tables import read_table

QuerySet = Literal["all", "silver"]

QUERY_COLUMNS = ["query_id", "move", "query_text", "gold_candidate_id", "exclude_candidate_ids", "paper_id", "marker"]
CANDIDATE_COLUMNS = ["candidate_id", "text", "source", "gold_moves", "paper_id"]


class BenchmarkDataError(UserError, ValueError):
    """The benchmark cannot be loaded as asked (missing table, unknown split or move, broken contract)."""


@dataclass(frozen=True)
class Query:
    query_id: str
    move: str
    text: str
    gold_ids: tuple[str, ...]  # one gold per query in Ratio; a tuple so that the metrics stay general
    exclude_ids: tuple[str, ...] = ()  # candidates this query must never be ranked against (its own sentence)
    paper_id: str | None = None
    marker: str | None = None


@dataclass
class CandidatePool:
    """One split's shared pool, sorted by candidate id. A sub-pool (oracle filtering) keeps its parent's rows."""

    split: str
    ids: list[str]
    texts: list[str]
    sources: list[str]
    gold_moves: list[tuple[str, ...]]
    paper_ids: list[str | None]
    parent: "CandidatePool | None" = None
    parent_rows: list[int] | None = None  # row of each candidate in ``parent``
    _index: dict[str, int] | None = field(default=None, repr=False)
    _version: str | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {cid: i for i, cid in enumerate(self.ids)}
        return self._index

    @property
    def version(self) -> str:
        """Content hash of (id, text) pairs: the embedding cache key, so a changed pool is re-encoded."""
        if self._version is None:
            digest = hashlib.sha256()
            for cid, text in zip(self.ids, self.texts):
                digest.update(cid.encode())
                digest.update(b"\x1f")
                digest.update(text.encode())
                digest.update(b"\x1e")
            self._version = digest.hexdigest()[:16]
        return self._version

    def subset(self, keep_ids: Iterable[str]) -> "CandidatePool":
        """The sub-pool of these candidates (ids outside the pool are an error), still sorted by id."""
        wanted = set(keep_ids)
        missing = wanted - set(self.index)
        if missing:
            raise BenchmarkDataError(f"{len(missing)} ids are not in the {self.split} pool, e.g. {sorted(missing)[:3]}")
        rows = [i for i, cid in enumerate(self.ids) if cid in wanted]
        return CandidatePool(
            split=self.split,
            ids=[self.ids[i] for i in rows],
            texts=[self.texts[i] for i in rows],
            sources=[self.sources[i] for i in rows],
            gold_moves=[self.gold_moves[i] for i in rows],
            paper_ids=[self.paper_ids[i] for i in rows],
            parent=self.root,
            parent_rows=[self.root_row(i) for i in rows],
        )

    def standalone(self) -> "CandidatePool":
        """The same candidates as a pool of its own (no parent): encoded from its texts, not sliced."""
        return CandidatePool(self.split, list(self.ids), list(self.texts), list(self.sources), list(self.gold_moves),
                             list(self.paper_ids))

    @property
    def root(self) -> "CandidatePool":
        return self if self.parent is None else self.parent

    def root_row(self, row: int) -> int:
        return row if self.parent is None else self.parent_rows[row]

    def gold_ids_of_move(self, move: str) -> list[str]:
        """Every candidate that is a gold of ``move`` in this split: the paper's oracle pool (a)."""
        return [cid for cid, moves in zip(self.ids, self.gold_moves) if move in moves]


@dataclass
class BenchmarkSplit:
    split: str
    pool: CandidatePool
    queries: dict[str, list[Query]]  # move -> queries, sorted by query id
    query_set: str = "all"
    source: str = ""
    counts: dict = field(default_factory=dict)  # what was read, kept and dropped, for the summary
    inputs: dict = field(default_factory=dict)  # name -> manifest entry (Delta version or file hashes read)

    def summary(self) -> dict:
        return {
            "split": self.split,
            "source": self.source,
            "query_set": self.query_set,
            "pool_candidates": len(self.pool),
            "pool_version": self.pool.version,
            "queries_by_move": {move: len(qs) for move, qs in self.queries.items()},
            **self.counts,
        }


# --------------------------------------------------------------------------------------------- reading


def lexicon_versions(tables_root: str | Path) -> list[str] | None:
    """The lexicon versions named in ``<tables_root>/mined_pairs`` (None without that table)."""
    mined = Path(tables_root) / "mined_pairs"
    if not is_delta_table(mined):
        return None
    return sorted(str(v) for v in read_table(mined, "mined_pairs", ["lexicon_version"]).column("lexicon_version")
                  .unique().to_pylist())


def _read_release(root: Path, split: str, name: str, columns: Sequence[str]) -> pa.Table:
    parquet_dir = root / "parquet" / split / name
    jsonl_file = root / "jsonl" / split / f"{name}.jsonl"
    if parquet_dir.is_dir():
        files = sorted(parquet_dir.glob("*.parquet"))
        if not files:
            raise BenchmarkDataError(f"{parquet_dir} holds no Parquet files")
        return pq.ParquetDataset(files).read(columns=list(columns))
    if jsonl_file.is_file():
        rows = [json.loads(line) for line in jsonl_file.read_text().splitlines() if line.strip()]
        return pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows])
    raise BenchmarkDataError(
        f"no {name} for split {split!r} in the release at {root} (looked for {parquet_dir} and {jsonl_file})"
    )


def silver_verdicts(location: str | Path, inputs: dict | None = None) -> pa.Table:
    """The LLM judge's verdicts (``query_id``, ``move``, ``accepted``); a clear error when absent; ``inputs``
    (if given) records the version read."""
    location = Path(location)
    if not is_delta_table(location):
        raise BenchmarkDataError(
            f"--queries silver needs the Delta table 'silver' (query_id, move, accepted) at {location}, and there "
            "is none: build it with the LLM judge first, point to it with --silver PATH, or evaluate --queries all"
        )
    return read_table(location, "silver", ["query_id", "move", "accepted"], inputs={} if inputs is None else inputs,
                      error=BenchmarkDataError)


# --------------------------------------------------------------------------------------------- assembling


def _as_tuple(value) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(str(v) for v in value)


def _pool_from_arrow(split: str, candidates: pa.Table) -> CandidatePool:
    rows = candidates.sort_by("candidate_id").to_pydict()
    ids = rows["candidate_id"]
    if len(set(ids)) != len(ids):
        raise BenchmarkDataError(f"the {split} pool holds duplicate candidate ids")
    return CandidatePool(
        split=split,
        ids=ids,
        texts=[t or "" for t in rows["text"]],
        sources=rows.get("source") or [""] * len(ids),
        gold_moves=[_as_tuple(v) for v in rows.get("gold_moves") or [()] * len(ids)],
        paper_ids=rows.get("paper_id") or [None] * len(ids),
    )


def sample_order(query_id: str, seed: int) -> str:
    """The seeded order of a query sample: no random generator, so the sample depends only on the ids and
    the seed, on any machine and in any row order."""
    return hashlib.sha256(f"{seed}\x1f{query_id}".encode("utf-8")).hexdigest()


def assemble_split(
    split: str,
    queries: pa.Table,
    candidates: pa.Table,
    moves: Sequence[str] = MOVES,
    silver: pa.Table | None = None,
    source: str = "",
    max_queries: int | None = None,
    sample_per_move: int | None = None,
    sample_seed: int = 13,
) -> BenchmarkSplit:
    """Queries per move and the pool from Arrow tables; checks the contract (every gold is in the pool)."""
    unknown = [m for m in moves if m not in MOVES]
    if unknown:
        raise BenchmarkDataError(f"unknown move(s) {unknown}; choose from {list(MOVES)}")
    pool = _pool_from_arrow(split, candidates)
    counts: dict = {"queries_read": queries.num_rows}
    rows = queries.to_pylist()
    if silver is not None:
        accepted = {
            (r["query_id"]) for r in silver.to_pylist() if r.get("accepted") is True
        }
        before = len(rows)
        rows = [r for r in rows if r["query_id"] in accepted]
        counts["silver_accepted_in_split"] = len(rows)
        counts["queries_not_accepted_or_unjudged"] = before - len(rows)
    by_move: dict[str, list[Query]] = {move: [] for move in moves}
    missing_gold: list[str] = []
    exclusions_outside_pool = 0
    other_moves = 0
    for row in rows:
        if row["move"] not in by_move:
            other_moves += 1
            continue
        gold = str(row["gold_candidate_id"])
        if gold not in pool.index:
            missing_gold.append(row["query_id"])
            continue
        excluded = _as_tuple(row.get("exclude_candidate_ids"))
        exclusions_outside_pool += sum(1 for cid in excluded if cid not in pool.index)
        by_move[row["move"]].append(
            Query(
                query_id=str(row["query_id"]), move=row["move"], text=row["query_text"] or "", gold_ids=(gold,),
                exclude_ids=excluded, paper_id=row.get("paper_id"), marker=row.get("marker"),
            )
        )
    if missing_gold:
        raise BenchmarkDataError(
            f"{len(missing_gold)} {split} queries have a gold candidate outside the {split} pool "
            f"(e.g. {missing_gold[:3]}): the queries and candidates tables do not belong together"
        )
    for move in by_move:
        if sample_per_move is not None:
            counts["query_sample"] = {"per_move": sample_per_move, "seed": sample_seed}
        if sample_per_move is not None and len(by_move[move]) > sample_per_move:
            counts.setdefault("queries_sampled_out", {})[move] = len(by_move[move]) - sample_per_move
            by_move[move] = sorted(by_move[move], key=lambda q: sample_order(q.query_id, sample_seed))[:sample_per_move]
        by_move[move].sort(key=lambda q: q.query_id)
        if max_queries is not None and len(by_move[move]) > max_queries:
            counts.setdefault("queries_capped", {})[move] = len(by_move[move]) - max_queries
            by_move[move] = by_move[move][:max_queries]
    counts["queries_of_other_moves"] = other_moves
    counts["queries_with_exclusions"] = sum(1 for qs in by_move.values() for q in qs if q.exclude_ids)
    counts["exclusions_outside_pool"] = exclusions_outside_pool
    return BenchmarkSplit(split=split, pool=pool, queries=by_move, query_set="silver" if silver is not None else "all",
                          source=source, counts=counts)


def load_split(
    source: str | Path,
    split: str = "test",
    moves: Sequence[str] = MOVES,
    queries: QuerySet = "all",
    silver_location: str | Path | None = None,
    max_queries: int | None = None,
    sample_per_move: int | None = None,
    sample_seed: int = 13,
) -> BenchmarkSplit:
    """Load a split from a tables root (Delta ``queries``/``candidates``) or a release root (auto-detected).

    ``silver_location`` defaults to ``<source>/silver`` for a tables root; a release needs it explicitly.
    ``max_queries`` keeps the first N queries of each move by query id (quick looks; reported in counts).
    ``sample_per_move`` keeps a seeded sample of N queries per move (``sample_order``; reported in counts).
    ``BenchmarkSplit.inputs`` records what was read, for the run manifest: each Delta table's location and
    version, or the release files' sha256.
    """
    if split not in SPLITS:
        raise BenchmarkDataError(f"unknown split {split!r}; choose from {list(SPLITS)}")
    if queries not in ("all", "silver"):
        raise BenchmarkDataError(f"unknown query set {queries!r}; choose 'all' or 'silver'")
    root = Path(source)
    inputs: dict[str, dict] = {}
    if is_delta_table(root / "queries") and is_delta_table(root / "candidates"):
        query_table = read_table(root / "queries", "queries", QUERY_COLUMNS, [("split", "=", split)], inputs=inputs,
                                 error=BenchmarkDataError)
        candidate_table = read_table(root / "candidates", "candidates", CANDIDATE_COLUMNS, [("split", "=", split)],
                                     inputs=inputs, error=BenchmarkDataError)
        kind = f"tables:{root}"
        default_silver = root / "silver"
    elif (root / "parquet").is_dir() or (root / "jsonl").is_dir():
        query_table = _read_release(root, split, "queries", QUERY_COLUMNS)
        candidate_table = _read_release(root, split, "candidates", CANDIDATE_COLUMNS)
        kind = f"release:{root}"
        default_silver = None
        inputs["release"] = files_entry(root, [f"parquet/{split}/**/*", f"jsonl/{split}/*"], split=split)
    else:
        raise BenchmarkDataError(
            f"{root} is neither a tables root (with Delta tables queries/ and candidates/) nor a release root "
            "(with parquet/ or jsonl/): run the pipeline (ratio-spark run) or export first"
        )
    silver = None
    if queries == "silver":
        location = silver_location or default_silver
        if location is None:
            raise BenchmarkDataError("--queries silver on a release needs --silver PATH (the Delta table 'silver')")
        silver = silver_verdicts(location, inputs)
    data = assemble_split(split, query_table, candidate_table, moves=moves, silver=silver, source=kind,
                          max_queries=max_queries, sample_per_move=sample_per_move, sample_seed=sample_seed)
    data.inputs = inputs
    return data
