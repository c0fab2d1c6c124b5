"""Build a study: two systems' runs on one split, a stratified sample of queries per move, a recorded A/B
order per query, and the queries dealt out to annotators.

* Runs are TREC files as ``ratio-spark evaluate`` writes them (``runs/<system>/<move>.trec``: ``qid Q0 cid
  rank score tag``); a folder means every ``*.trec`` file in it.
* Eligible queries: the split's queries of the chosen moves (optionally only those the silver judge
  accepted) that both runs rank. They are sampled per move with equal allocation across markers
  (``ratio_spark.silver.sampling``, the paper's appendix G protocol).
* A/B: per query, a seeded hash decides which system is List A; the study records it and the app never
  shows a system's name.
* Assignment: each query goes to the eligible annotator with the fewest queries so far (all annotators
  in round-robin mode, those who share the query's subfield in subfield mode), so that queries are dealt
  in turn; ``overlap`` of each move's queries go to a second annotator as well.

Every choice ranks sha256 hashes of (seed, id), so the same inputs and seed give the same study anywhere.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ratio_spark.core.errors import UserError
from ratio_spark.core.files import read_text
from ratio_spark.humaneval.study import StudyContent, token_digest
from ratio_spark.silver.sampling import sample_pairs, stable_rank_key


class AssignError(UserError, ValueError):
    """Inputs that cannot make a study (unreadable run, unknown annotator file, nothing to sample)."""


@dataclass
class Run:
    name: str
    path: str
    sha256: str
    rankings: dict[str, list[str]]  # query id -> candidate ids, best first


@dataclass
class Annotator:
    name: str
    subfields: tuple[str, ...] = ()


@dataclass
class NewStudy:
    content: StudyContent
    tokens: dict[str, str]  # account name -> secret token (shown once; the study keeps only its digest)
    counts: dict = field(default_factory=dict)
    allocation: pd.DataFrame | None = None


# ------------------------------------------------------------------------------------------------- inputs


def read_run(name: str, path: str | Path) -> Run:
    """A TREC run file, or a folder of them (one per move), as ranked candidate ids per query."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.trec"))
        if not files:
            raise AssignError(f"run {name!r}: {path} holds no *.trec files (expected runs/<system>/<move>.trec "
                              "from `ratio-spark evaluate`)")
    elif path.is_file():
        files = [path]
    else:
        raise AssignError(f"run {name!r}: no file or folder at {path}")
    digest = hashlib.sha256()
    ranked: dict[str, list[tuple[int, str]]] = {}
    owner: dict[str, Path] = {}
    for file in files:
        data = file.read_bytes()
        digest.update(file.name.encode() + b"\0" + data)
        for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 6 or not parts[3].isdigit():
                raise AssignError(f"{file}:{number}: not a TREC run line (qid Q0 docid rank score tag): {line[:80]!r}")
            qid, _, cid, rank = parts[:4]
            if owner.setdefault(qid, file) != file:
                raise AssignError(f"run {name!r}: query {qid} appears in {owner[qid].name} and {file.name}")
            ranked.setdefault(qid, []).append((int(rank), cid))
    rankings = {}
    for qid, items in ranked.items():
        items.sort()
        ids = [cid for _, cid in items]
        if len(set(ids)) != len(ids):
            raise AssignError(f"run {name!r}: query {qid} ranks a candidate twice")
        rankings[qid] = ids
    return Run(name=name, path=str(path), sha256=digest.hexdigest(), rankings=rankings)


def read_annotators(spec: str) -> list[Annotator]:
    """``alice,bob,carol``, or a CSV file with columns ``annotator`` and optional ``subfields`` (``;``-separated)."""
    path = Path(spec)
    if path.suffix == ".csv" or path.is_file():
        if not path.is_file():
            raise AssignError(f"annotator file not found: {path}")
        rows = list(csv.DictReader(io.StringIO(read_text(path, AssignError), newline="")))
        if not rows or "annotator" not in rows[0]:
            raise AssignError(f"{path}: needs a header with an 'annotator' column (and optionally 'subfields')")
        people = [Annotator(r["annotator"].strip(), tuple(s.strip() for s in (r.get("subfields") or "").split(";")
                                                           if s.strip())) for r in rows]
    else:
        people = [Annotator(n.strip()) for n in spec.split(",") if n.strip()]
    names = [p.name for p in people]
    if not names or any(not n for n in names):
        raise AssignError(f"no annotators in {spec!r}: give names (alice,bob) or a CSV file")
    if len(set(names)) != len(names):
        raise AssignError(f"annotator names repeat in {spec!r}")
    if "admin" in names:
        raise AssignError("'admin' is the study administrator's account name; choose another annotator name")
    bad = [n for n in names if not n.replace("-", "").replace("_", "").replace(".", "").isalnum()]
    if bad:
        raise AssignError(f"annotator names may use letters, digits, '-', '_' and '.' only: {bad}")
    return people


def read_subfields(path: str | Path) -> tuple[str, dict[str, str]]:
    """A CSV of ``subfield`` and one key column, ``query_id`` or ``paper_id``; returns (key column, mapping)."""
    path = Path(path)
    if not path.is_file():
        raise AssignError(f"subfield file not found: {path}")
    rows = list(csv.DictReader(io.StringIO(read_text(path, AssignError), newline="")))
    columns = set(rows[0]) if rows else set()
    key = "query_id" if "query_id" in columns else "paper_id" if "paper_id" in columns else None
    if key is None or "subfield" not in columns:
        raise AssignError(f"{path}: needs columns 'subfield' and 'query_id' or 'paper_id'")
    return key, {r[key].strip(): r["subfield"].strip() for r in rows if r[key].strip() and r["subfield"].strip()}


# ------------------------------------------------------------------------------------------------- choices


def list_a_first(seed: int, query_id: str) -> bool:
    """Whether the first system is List A for this query (a fair coin from a seeded hash)."""
    return int(stable_rank_key(f"{seed}:ab", query_id)[-1], 16) % 2 == 0


def deal(queries: pd.DataFrame, annotators: list[Annotator], *, mode: str, overlap: float, seed: int) -> tuple[list[dict], dict]:
    """Assign each query (``query_id``, ``move``, ``subfield``) to annotators; returns (assignments, counts).

    Queries are dealt per move in a seeded order to the eligible annotator with the fewest queries so
    far (ties: the order of ``annotators``), so every annotator gets a share of every move. In each move,
    ``ceil(overlap * n)`` queries (another seeded order) get a second, different annotator.
    """
    load = {a.name: 0 for a in annotators}
    rows: list[dict] = []
    counts = {"second_annotator_missing": 0}

    def eligible(subfield) -> list[str]:
        if mode == "round_robin":
            return [a.name for a in annotators]
        return [a.name for a in annotators if subfield in a.subfields]

    def pick(names: list[str], exclude: set[str]) -> str | None:
        names = [n for n in names if n not in exclude]
        return min(names, key=lambda n: load[n]) if names else None  # min keeps the first of equal loads

    for move, group in queries.groupby("move", sort=True):
        order = sorted(group.itertuples(index=False), key=lambda q: stable_rank_key(f"{seed}:deal", q.query_id))
        doubled = {q.query_id for q in sorted(order, key=lambda q: stable_rank_key(f"{seed}:overlap", q.query_id))
                   [:math.ceil(overlap * len(order))]}
        for query in order:
            first = pick(eligible(query.subfield), set())
            load[first] += 1
            rows.append({"annotator": first, "query_id": query.query_id})
            if query.query_id in doubled:
                second = pick(eligible(query.subfield), {first})
                if second is None:
                    counts["second_annotator_missing"] += 1
                    continue
                load[second] += 1
                rows.append({"annotator": second, "query_id": query.query_id})
    for name in load:  # each annotator's own order mixes moves
        mine = sorted((r for r in rows if r["annotator"] == name),
                      key=lambda r: stable_rank_key(f"{seed}:order:{name}", r["query_id"]))
        for position, row in enumerate(mine, start=1):
            row["position"] = position
    counts["assignments"] = len(rows)
    counts["queries_labelled_twice"] = len(rows) - len({r["query_id"] for r in rows})
    return rows, counts


# ------------------------------------------------------------------------------------------------- the study


def code_commit() -> str | None:
    """The git commit of this code, when it runs from a checkout (for the study's and the report's manifest)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def build_study(
    pairs: pd.DataFrame,
    candidates: pd.DataFrame,
    runs: list[Run],
    annotators: list[Annotator],
    *,
    split: str,
    moves: list[str],
    per_move: int,
    stratify_by: str = "marker_entry",
    seed: int = 17,
    depth: int = 10,
    mode: str = "round_robin",
    overlap: float = 0.0,
    subfields: tuple[str, dict[str, str]] | None = None,
    accepted: set[str] | None = None,
    source: str = "",
) -> NewStudy:
    """Everything a study file holds, from the split's pairs (``silver.pairs.load_pairs``), its pool's
    candidates (``candidate_id``, ``text``, ``paper_id``) and two runs. Counts reconcile:
    ``queries_in_split = other moves + not silver + missing from a run + no annotator + eligible``."""
    if len(runs) != 2 or runs[0].name == runs[1].name:
        raise AssignError("a study compares exactly two systems with different names")
    if mode == "subfield" and subfields is None:
        raise AssignError("subfield assignment needs a subfield file (--subfields) mapping queries or papers to subfields")
    if mode == "subfield" and not any(a.subfields for a in annotators):
        raise AssignError("subfield assignment needs annotators with subfields (an annotator CSV with a 'subfields' column)")
    pool = set(candidates["candidate_id"])
    for run in runs:
        outside = {cid for ids in run.rankings.values() for cid in ids[:depth]} - pool
        if outside:
            raise AssignError(f"run {run.name!r} ranks {len(outside)} candidates that are not in the {split} pool "
                              f"(e.g. {sorted(outside)[0]}): was it made on this split of these tables?")
    counts: dict = {"queries_in_split": len(pairs)}
    frame = pairs[pairs["move"].isin(moves)]
    counts["other_moves"] = len(pairs) - len(frame)
    if accepted is not None:
        kept = frame[frame["query_id"].isin(accepted)]
        counts["not_silver_accepted"] = len(frame) - len(kept)
        frame = kept
    in_runs = frame["query_id"].map(lambda q: all(run.rankings.get(q) for run in runs))
    counts["missing_from_a_run"] = int((~in_runs).sum())
    frame = frame[in_runs]
    subfield_of = pd.Series([None] * len(frame), index=frame.index, dtype=object)
    if subfields is not None:
        key, mapping = subfields
        subfield_of = frame[key].map(mapping)
        if mode == "subfield":
            covered = {s for a in annotators for s in a.subfields}
            has = subfield_of.isin(covered)
            counts["no_annotator_for_subfield"] = int((~has).sum())
            frame, subfield_of = frame[has], subfield_of[has]
    frame = frame.assign(subfield=subfield_of)
    counts["eligible"] = len(frame)
    if frame.empty:
        raise AssignError(f"no eligible queries ({counts}): check the split, the moves and that both runs rank this split")

    sample = sample_pairs(frame, {m: per_move for m in moves}, seed=seed, stratify_by=stratify_by)
    chosen = sample.pairs
    counts["sampled_by_move"] = chosen.groupby("move").size().to_dict()
    assignments, deal_counts = deal(chosen[["query_id", "move", "subfield"]], annotators, mode=mode, overlap=overlap,
                                    seed=seed)
    counts.update(deal_counts)

    first, second = runs
    queries, lists, shown = [], [], set()
    for row in chosen.itertuples(index=False):
        a, b = (first, second) if list_a_first(seed, row.query_id) else (second, first)
        queries.append({"query_id": row.query_id, "move": row.move, "marker": row.marker, "stratum": row.stratum,
                        "query_text": row.query_text_original, "gold_candidate_id": row.gold_candidate_id,
                        "paper_id": row.paper_id, "subfield": row.subfield, "system_a": a.name, "system_b": b.name})
        for run in runs:
            for rank, cid in enumerate(run.rankings[row.query_id][:depth], start=1):
                lists.append({"query_id": row.query_id, "system": run.name, "rank": rank, "candidate_id": cid})
                shown.add(cid)
    texts = candidates[candidates["candidate_id"].isin(shown)]
    tokens = {a.name: secrets.token_urlsafe(24) for a in annotators}
    tokens["admin"] = secrets.token_urlsafe(24)
    accounts = [{"name": a.name, "role": "annotator", "subfields": ";".join(a.subfields),
                 "token_sha256": token_digest(tokens[a.name])} for a in annotators]
    accounts.append({"name": "admin", "role": "admin", "subfields": "", "token_sha256": token_digest(tokens["admin"])})
    meta = {
        "split": split, "moves": list(moves), "per_move": per_move, "stratify_by": stratify_by, "seed": seed,
        "depth": depth, "assignment": mode, "overlap": overlap, "query_set": "silver" if accepted is not None else "all",
        "source": source, "systems": [r.name for r in runs], "counts": counts, "code_commit": code_commit(),
        "allocation": sample.allocation.to_dict("records"),
        "created_at": pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds"),
    }
    content = StudyContent(
        meta=meta,
        systems=[{"system": r.name, "position": i, "run_path": r.path, "run_sha256": r.sha256} for i, r in enumerate(runs)],
        queries=queries,
        candidates=[{"candidate_id": r.candidate_id, "text": r.text, "paper_id": r.paper_id}
                    for r in texts.itertuples(index=False)],
        lists=lists, accounts=accounts, assignments=assignments,
    )
    return NewStudy(content=content, tokens=tokens, counts=counts, allocation=sample.allocation)


def load_inputs(location, split: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The split's pairs and its pool's display texts from the Delta tables (``config.tables.location``)."""
    from ratio_spark.evaluation.tables import read_table
    from ratio_spark.silver.pairs import load_pairs

    pairs = load_pairs(location, split)
    pool = read_table(location("candidates"), "candidates", ["candidate_id", "text", "text_original", "paper_id"],
                      [("split", "=", split)], error=AssignError).to_pandas()
    # What people read: the sentence as written (marker removed, case kept); the normalised text otherwise.
    original = pool["text_original"].fillna("")
    pool["text"] = original.where(original.str.strip() != "", pool["text"])
    return pairs, pool[["candidate_id", "text", "paper_id"]]


def write_links(path: str | Path, tokens: dict[str, str]) -> Path:
    """The personal link paths, one per account, in a file only its owner can read."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text("account\tlink path (append to the server's address)\n"
                    + "".join(f"{name}\t/t/{token}\n" for name, token in tokens.items()), encoding="utf-8")
    return path

