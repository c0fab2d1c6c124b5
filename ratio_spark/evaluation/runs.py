"""First-stage runs on disk: TREC run files (``qid Q0 docid rank score tag``), as ``evaluate`` writes them in
``<results>/runs/<system>/<move>.trec``, or as any other tool does (one file may hold every move).

Each query's candidates are ordered by score descending, then candidate id ascending: trec_eval's order
and the evaluation's tie rule, so a run written by ``evaluate`` reads back in its own order.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ratio_spark.core.errors import UserError
from ratio_spark.core.files import read_text
from ratio_spark.evaluation.retrieval.base import Ranking, Rankings


def run_folder_name(system: str) -> str:
    """A system id as a file or folder name (``dense:minilm`` -> ``dense_minilm``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", system).strip("_")


class RunError(UserError, ValueError):
    """A run file or folder that cannot be read; the message names the file and line."""


def read_trec_run(path: str | Path) -> Rankings:
    path = Path(path)
    if not path.is_file():
        raise RunError(f"no run file at {path}")
    scored: dict[str, dict[str, float]] = {}
    for line_no, line in enumerate(read_text(path, RunError).splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise RunError(f"{path}:{line_no}: expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}")
        qid, _, cid, _, score, _ = parts
        try:
            value = float(score)
        except ValueError:
            raise RunError(f"{path}:{line_no}: score {score!r} is not a number") from None
        if cid in scored.setdefault(qid, {}):
            raise RunError(f"{path}:{line_no}: candidate {cid} appears twice for query {qid}")
        scored[qid][cid] = value
    rankings: Rankings = {}
    for qid, scores in scored.items():
        ordered = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        rankings[qid] = Ranking(ids=[c for c, _ in ordered], scores=[s for _, s in ordered])
    return rankings


def read_run_files(path: str | Path) -> Rankings:
    """One TREC file, or a folder of them (``<move>.trec``, as ``evaluate`` writes per system), merged."""
    path = Path(path)
    files = sorted(path.glob("*.trec")) if path.is_dir() else [path]
    if not files:
        raise RunError(f"no *.trec files in {path}")
    merged: Rankings = {}
    for file in files:
        for qid, ranking in read_trec_run(file).items():
            if qid in merged:
                raise RunError(f"query {qid} is in more than one run file under {path}")
            merged[qid] = ranking
    return merged


def runs_of_results(folder: str | Path) -> list[tuple[str, str, Path]]:
    """(system name, label, run folder) of every first-stage system of an ``evaluate`` results folder."""
    folder = Path(folder)
    summary_file = folder / "summary.json"
    if not summary_file.is_file():
        raise RunError(f"{folder} has no summary.json: not a results folder written by ratio-spark evaluate")
    systems = json.loads(summary_file.read_text()).get("systems", [])
    out = []
    for system in systems:
        if system.get("first_stage"):
            continue  # an already reranked pipeline is not a first stage
        run_dir = folder / "runs" / run_folder_name(system["name"])
        if not run_dir.is_dir():
            raise RunError(f"{folder}: no runs for {system['name']} (looked in {run_dir})")
        out.append((system["name"], system.get("label", system["name"]), run_dir))
    if not out:
        raise RunError(f"{folder}/summary.json lists no first-stage systems")
    return out
