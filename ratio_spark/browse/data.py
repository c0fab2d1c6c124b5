"""What the benchmark browser shows, read once at start: a release's queries and pools (``evaluation/data.py``),
its counts and ``stats/`` (written by ``export``), and the first-stage runs of ``ratio-spark evaluate`` results
folders (``evaluation/runs.py``). Read-only: nothing here writes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ratio_spark.core.errors import UserError
from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.evaluation.data import CandidatePool, Query, load_split
from ratio_spark.evaluation.retrieval.base import Rankings
from ratio_spark.evaluation.runs import read_run_files, runs_of_results

TOP = 10  # candidates shown per system on a query's page
MAX_TEXT_FILTER = 200  # characters of a text filter


class BrowseError(UserError, ValueError):
    """A release or results folder the browser cannot show; the message names it."""


@dataclass
class SystemRuns:
    results: str  # the results folder, as given
    label: str  # the system's label in that folder ("BM25-unigram")
    split: str
    rankings: Rankings


@dataclass
class Shown:
    """One query as its page shows it."""

    split: str
    query: Query
    gold_texts: list[str]
    ranked: list[dict]  # per system: results, label, top (rank, candidate_id, text, is_gold), gold_rank


@dataclass
class Benchmark:
    release: Path
    manifest: dict
    pools: dict[str, CandidatePool]
    queries: dict[str, tuple[str, Query]]  # query_id -> (split, query)
    stats: dict[str, list[dict]] = field(default_factory=dict)
    systems: list[SystemRuns] = field(default_factory=list)

    @property
    def markers(self) -> list[str]:
        return sorted({q.marker for _, q in self.queries.values() if q.marker})

    def find(self, split: str | None = None, move: str | None = None, marker: str | None = None,
             text: str | None = None) -> list[tuple[str, Query]]:
        """Queries in (split, move, query id) order; ``text`` matches the query text, case-insensitively."""
        needle = (text or "").casefold()
        found = [(s, q) for s, q in self.queries.values()
                 if (not split or s == split) and (not move or q.move == move) and (not marker or q.marker == marker)
                 and needle in q.text.casefold()]
        return sorted(found, key=lambda item: (SPLITS.index(item[0]), MOVES.index(item[1].move), item[1].query_id))

    def show(self, query_id: str) -> Shown | None:
        if query_id not in self.queries:
            return None
        split, query = self.queries[query_id]
        pool = self.pools[split]
        text = {cid: pool.texts[pool.index[cid]] for cid in query.gold_ids}
        ranked = []
        for system in self.systems:
            if system.split != split:
                continue
            ranking = system.rankings.get(query_id)
            ids = ranking.ids if ranking else []
            top = [{"rank": rank, "candidate_id": cid, "is_gold": cid in query.gold_ids,
                    "text": pool.texts[pool.index[cid]] if cid in pool.index else "(not in the release's pool)"}
                   for rank, cid in enumerate(ids[:TOP], start=1)]
            gold_rank = next((rank for rank, cid in enumerate(ids, start=1) if cid in query.gold_ids), None)
            ranked.append({"results": system.results, "label": system.label, "top": top, "gold_rank": gold_rank,
                           "depth": len(ids), "missing": ranking is None})
        return Shown(split, query, [text[cid] for cid in query.gold_ids], ranked)


def _stats(release: Path) -> dict[str, list[dict]]:
    stats = {}
    for path in sorted((release / "stats").glob("*.jsonl")):
        try:
            stats[path.stem] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BrowseError(f"{path} is not JSON lines ({exc}): export the release again") from None
    return stats


def load_benchmark(release: str | Path, results: list[str | Path] = ()) -> Benchmark:
    """The release and the runs of each results folder; a missing or broken folder is one line (``BrowseError``)."""
    root = Path(release)
    manifest_file = root / "manifest.json"
    if not root.is_dir():
        raise BrowseError(f"no release folder at {root}: give the folder `ratio-spark export` wrote (release.root)")
    if not manifest_file.is_file():
        raise BrowseError(f"{root} has no manifest.json: not a release, or its export did not finish (run `ratio-spark export`)")
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        splits = [s for s in SPLITS if s in manifest["splits"]]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise BrowseError(f"{manifest_file} is not a release manifest: export the release again") from None
    pools, queries = {}, {}
    for split in splits:
        data = load_split(root, split)
        pools[split] = data.pool
        queries.update({q.query_id: (split, q) for qs in data.queries.values() for q in qs})
    benchmark = Benchmark(root, manifest, pools, queries, _stats(root))
    for folder in results:
        folder = Path(folder)
        if not folder.is_dir():
            raise BrowseError(f"no results folder at {folder}: give a folder `ratio-spark evaluate --results` wrote")
        for _, label, run_dir in runs_of_results(folder):
            rankings = read_run_files(run_dir)
            unknown = [qid for qid in rankings if qid not in queries]
            if unknown:
                raise BrowseError(f"{run_dir} ranks {len(unknown)} queries that are not in the release at {root} "
                                  f"(e.g. {unknown[0]}): the results come from another benchmark")
            split = queries[next(iter(rankings))][0] if rankings else None  # a results folder scores one split
            benchmark.systems.append(SystemRuns(str(folder), label, split, rankings))
    return benchmark
