"""Stage-wise scoring of logged trajectories (the paper's §3.3, §4.1 and B.3).

Per episode, with ``Y`` the graded antecedents and their gains (T1/T2/T3 = 1/3/7 by default), ``E`` the
unique ids the searches returned (in order of first exposure) and ``S`` the canonical submission:

* ``ndcg`` (G_final): DCG@k of ``S`` over the ideal DCG@k of ``Y``; an episode without a submission, or
  with an empty one, scores 0 (failure as zero);
* ``g_selected``: the ideal DCG@k of the gains in ``S`` (the best order of the same support) over the
  ideal DCG@k of ``Y``; ``g_exposed``: the same for ``E``. So G_final <= G_selected, and
  G_selected <= G_exposed <= 1 whenever only exposed ids can be submitted (checked per episode);
* ``recall`` = |S ∩ Y| / |Y|, ``mrr`` = 1 / rank of the first hit in S, ``any_hit`` = at least one hit,
  ``hits_ge_<n>`` = at least n hits (averaged only over targets with at least n labels);
* ``exposure_recall`` = |E ∩ Y| / |Y| (and among the first ``first_exposures`` ids), ``zero_exposure`` =
  no graded antecedent exposed;
* ``duplicate_queries`` (a query repeating an earlier one of the episode, after lowercasing and
  whitespace collapse), ``calls`` (tool calls, valid or not), ``searches``, ``malformed_calls``.

Aggregates are means over targets; ``gain_kept`` = mean G_selected / mean G_exposed and ``rank_quality``
= mean G_final / mean G_selected (the paper's Equation 10 ratios, as ratios of means).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ratio_spark.core.errors import UserError
from ratio_spark.inspire.service import MALFORMED_KINDS, SUBMITTED, normalise_query


class ScoringError(UserError, ValueError):
    """Trajectories that cannot be scored as they are (or a broken nesting check)."""


@dataclass
class Trajectory:
    episode_id: str
    run_id: str
    instance_id: str
    queries: list[str] = field(default_factory=list)
    returned: list[list[str]] = field(default_factory=list)
    ranking: list[str] = field(default_factory=list)
    status: str = "running"
    calls: int = 0
    errors: list[dict] = field(default_factory=list)
    protocol_sha256: str | None = None

    @property
    def exposed(self) -> list[str]:
        return list(dict.fromkeys(pid for ids in self.returned for pid in ids))


def read_trajectory(path: str | Path) -> Trajectory:
    """Rebuild a trajectory from its event file (start, search, error, submit, end)."""
    events = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not events or events[0].get("event") != "start":
        raise ScoringError(f"{path}: a trajectory file starts with a start event")
    start = events[0]
    out = Trajectory(start["episode_id"], start["run_id"], start["instance_id"], protocol_sha256=start.get("protocol_sha256"))
    for event in events[1:]:
        kind = event.get("event")
        if kind == "search":
            out.queries.append(event["query"])
            out.returned.append(list(event["returned_ids"]))
        elif kind == "error":
            out.errors.append(event)
        elif kind == "submit":
            out.ranking = list(event["ranking"])
        elif kind == "end":
            out.status, out.calls = event["status"], int(event["calls"])
    return out


def read_run(folder: str | Path) -> dict[str, Trajectory]:
    """instance id -> trajectory of every episode file in a run's trajectory folder."""
    trajectories = [read_trajectory(p) for p in sorted(Path(folder).glob("*.jsonl"))]
    by_instance: dict[str, Trajectory] = {}
    for trajectory in trajectories:
        if trajectory.instance_id in by_instance:
            raise ScoringError(f"{folder}: two episodes of instance {trajectory.instance_id}")
        by_instance[trajectory.instance_id] = trajectory
    return by_instance


def dcg(gains: list[float]) -> float:
    return sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))


def ideal_dcg(gains: list[float], k: int) -> float:
    return dcg(sorted(gains, reverse=True)[:k])


def episode_metrics(labels: dict[str, float], trajectory: Trajectory | None, k: int = 10,
                    multi_hit: tuple[int, ...] = (1, 3, 5), first_exposures: int = 50) -> dict[str, float | int | None]:
    """The metrics of one target (a missing trajectory scores as a failed episode)."""
    trajectory = trajectory or Trajectory("", "", "", status="missing")
    ideal = ideal_dcg(list(labels.values()), k)
    if ideal <= 0:
        raise ScoringError("a target without graded antecedents cannot be scored")
    ranking = trajectory.ranking[:k] if trajectory.status == SUBMITTED else []
    exposed = trajectory.exposed
    hits = [pid for pid in ranking if pid in labels]
    first_hit = next((rank for rank, pid in enumerate(ranking, 1) if pid in labels), None)
    exposed_hits = [pid for pid in exposed if pid in labels]
    seen, duplicates = set(), 0
    for query in trajectory.queries:
        key = normalise_query(query)
        duplicates += key in seen
        seen.add(key)
    row = {
        "labels": len(labels),
        "ndcg": dcg([labels.get(pid, 0.0) for pid in ranking]) / ideal,
        "g_selected": ideal_dcg([labels[pid] for pid in hits], k) / ideal,
        "g_exposed": ideal_dcg([labels[pid] for pid in exposed_hits], k) / ideal,
        "recall": len(hits) / len(labels),
        "mrr": 1.0 / first_hit if first_hit else 0.0,
        "any_hit": int(bool(hits)),
        "hits": len(hits),
        "exposure_recall": len(exposed_hits) / len(labels),
        f"exposure_recall_first_{first_exposures}": len([p for p in exposed[:first_exposures] if p in labels]) / len(labels),
        "zero_exposure": int(not exposed_hits),
        "duplicate_queries": duplicates,
        "calls": trajectory.calls,
        "searches": len(trajectory.queries),
        "malformed_calls": sum(1 for e in trajectory.errors if e.get("kind") in MALFORMED_KINDS),
        "unique_ids_per_call": len(exposed) / trajectory.calls if trajectory.calls else 0.0,
        "status": trajectory.status,
    }
    for n in multi_hit:
        row[f"hits_ge_{n}"] = int(len(hits) >= n) if len(labels) >= n else None
    return row


def check_nesting(row: dict, exposed_only: bool, eps: float = 1e-9) -> None:
    """G_final <= G_selected always; G_selected <= G_exposed <= 1 when only exposed ids can be submitted."""
    if row["ndcg"] > row["g_selected"] + eps:
        raise ScoringError(f"G_final {row['ndcg']:.4f} > G_selected {row['g_selected']:.4f}")
    if exposed_only and not (row["g_selected"] <= row["g_exposed"] + eps and row["g_exposed"] <= 1 + eps):
        raise ScoringError(f"G_selected {row['g_selected']:.4f} > G_exposed {row['g_exposed']:.4f} or G_exposed > 1")


MEAN_METRICS = ("ndcg", "recall", "mrr", "any_hit", "g_exposed", "g_selected", "zero_exposure", "exposure_recall",
                "duplicate_queries", "calls", "searches", "malformed_calls", "unique_ids_per_call")


def aggregate(rows: list[dict]) -> dict[str, float | int | None]:
    """Means over targets, multi-hit rates over the targets with enough labels, the Equation 10 ratios,
    and the reporter's counts (expected, attempted, completed, submitted, scored)."""
    n = len(rows)
    out: dict[str, float | int | None] = {
        "expected": n,
        "attempted": sum(1 for r in rows if r["status"] != "missing"),
        "completed": sum(1 for r in rows if r["status"] not in ("missing", "running")),
        "submitted": sum(1 for r in rows if r["status"] == SUBMITTED),
        "scored": n,
    }
    for name in MEAN_METRICS:
        out[name] = sum(r[name] for r in rows) / n if n else None
    for key in [k for k in (rows[0] if rows else {}) if k.startswith(("hits_ge_", "exposure_recall_first_"))]:
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = sum(values) / len(values) if values else None
        if key.startswith("hits_ge_"):
            out[f"{key}_targets"] = len(values)
    out["gain_kept"] = out["g_selected"] / out["g_exposed"] if out.get("g_exposed") else None
    out["rank_quality"] = out["ndcg"] / out["g_selected"] if out.get("g_selected") else None
    return out
