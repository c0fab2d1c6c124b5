"""``ratio-spark inspire score``: runs scored on one instance version, written as tables and a funnel plot.

Output folder: ``episodes.csv`` (one row per run and target), ``summary.csv`` / ``results.md`` (per run:
the paper's Table 2 and Table 3 columns with paired-bootstrap intervals for nDCG@10, and the reporter's
expected/attempted/completed/submitted/scored counts), ``paired.md`` (each run against the first one),
``funnel.png`` (G_exposed, G_selected, G_final per run) and ``manifest.json``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from ratio_spark.core.markdown import markdown_table
from ratio_spark.inspire.instances import InstanceSet
from ratio_spark.inspire.manifest import code_commit, now_utc, sha256_file, write_json
from ratio_spark.inspire.scoring import aggregate, check_nesting, episode_metrics, read_run
from ratio_spark.inspire.settings import ScoringConfig
from ratio_spark.inspire.stats import bootstrap_mean_ci, paired_bootstrap_ci

TABLE2 = [("ndcg", "nDCG@10"), ("recall", "Recall@10"), ("mrr", "MRR"), ("any_hit", "AnyHit@10"),
          ("hits_ge_1", "≥1 hit"), ("hits_ge_3", "≥3 hits"), ("hits_ge_5", "≥5 hits"), ("calls", "calls")]
TABLE3 = [("g_exposed", "G_exposed"), ("g_selected", "G_selected"), ("ndcg", "G_final"), ("gain_kept", "gain kept"),
          ("rank_quality", "rank quality"), ("zero_exposure", "no relevant item exposed"),
          ("duplicate_queries", "duplicate queries"), ("malformed_calls", "malformed calls")]
COUNT_KEYS = ("expected", "attempted", "completed", "submitted", "scored")


def score_runs(instances: InstanceSet, runs: dict[str, Path], config: ScoringConfig, only_clean: bool = False,
               max_instances: int | None = None) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """(per run: one metrics row per target in manifest order, per run: aggregates). ``only_clean``:
    targets whose brief the lexical check did not flag; ``max_instances``: the first N of the manifest
    (as ``inspire run --max-instances`` ran them)."""
    per_run, summaries = {}, {}
    targets = list(instances.instances.values())[:max_instances]
    targets = [i for i in targets if not (only_clean and i.flagged)]
    for name, folder in runs.items():
        trajectories = read_run(folder)
        unknown = sorted(set(trajectories) - set(instances.instances))
        if unknown:
            raise ValueError(f"run {name}: trajectories of instances not in this version: {unknown[:3]}")
        rows = []
        for instance in targets:
            row = episode_metrics(instance.gains, trajectories.get(instance.instance_id), config.k,
                                  tuple(config.multi_hit), config.first_exposures)
            check_nesting(row, config.require_exposed)
            rows.append({"run": name, "instance_id": instance.instance_id, **row})
        per_run[name] = rows
        summary = aggregate(rows)
        mean, low, high = bootstrap_mean_ci([r["ndcg"] for r in rows], resamples=config.bootstrap_resamples,
                                            confidence=config.confidence, seed=config.seed)
        summary.update(ndcg_low=low, ndcg_high=high)
        summaries[name] = summary
    return per_run, summaries


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(summaries: dict[str, dict], columns: list[tuple[str, str]]) -> str:
    rows = []
    for name, s in summaries.items():
        cells = []
        for key, _ in columns:
            cell = _fmt(s.get(key), 1 if key in ("calls", "duplicate_queries", "malformed_calls") else 3)
            if key == "ndcg" and columns is TABLE2:
                cell += f" [{_fmt(s['ndcg_low'])}, {_fmt(s['ndcg_high'])}]"
            cells.append(cell)
        rows.append([name, *cells])
    return markdown_table(["run", *(label for _, label in columns)], rows)


def paired_rows(per_run: dict[str, list[dict]], config: ScoringConfig) -> list[dict]:
    """Each run against the first: the paired difference of nDCG@10 and G_exposed, with intervals."""
    names = list(per_run)
    out = []
    for name in names[1:]:
        for metric in ("ndcg", "g_exposed", "g_selected"):
            diff, low, high = paired_bootstrap_ci([r[metric] for r in per_run[names[0]]], [r[metric] for r in per_run[name]],
                                                  resamples=config.bootstrap_resamples, confidence=config.confidence,
                                                  seed=config.seed)
            out.append({"baseline": names[0], "run": name, "metric": metric, "difference": diff, "low": low, "high": high})
    return out


def funnel_plot(summaries: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summaries)
    stages = [("g_exposed", "exposed"), ("g_selected", "selected"), ("ndcg", "final (nDCG@10)")]
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(names) + 2), 3.6))
    width = 0.8 / len(stages)
    for i, (key, label) in enumerate(stages):
        ax.bar([x + i * width for x in range(len(names))], [summaries[n][key] or 0 for n in names], width, label=label)
    ax.set_xticks([x + width for x in range(len(names))], names, rotation=15, ha="right")
    ax.set_ylabel("normalised gain")
    ax.set_ylim(0, 1)
    ax.set_title("Inspire funnel: exposure, selection, ranking")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_reports(instances: InstanceSet, runs: dict[str, Path], config: ScoringConfig, out: str | Path,
                  only_clean: bool = False, max_instances: int | None = None) -> dict[str, dict]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    per_run, summaries = score_runs(instances, runs, config, only_clean, max_instances)
    rows = [r for name in per_run for r in per_run[name]]
    with open(out / "episodes.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["run"])
        writer.writeheader()
        writer.writerows(rows)
    with open(out / "summary.csv", "w", newline="", encoding="utf-8") as handle:
        keys = sorted({k for s in summaries.values() for k in s})
        writer = csv.DictWriter(handle, fieldnames=["run", *keys])
        writer.writeheader()
        writer.writerows({"run": name, **s} for name, s in summaries.items())
    paired = paired_rows(per_run, config)
    view = ("targets with unflagged briefs" if only_clean else "all targets") + (
        f", the first {max_instances} of the manifest" if max_instances else "")
    lines = [f"# Inspire results: {instances.manifest['version']} ({len(next(iter(per_run.values()), []))} targets, {view})",
             "", "## End to end (failure as zero; nDCG@10 with a 95% target-bootstrap interval)", "",
             _table(summaries, TABLE2), "", "## Funnel: exposure, selection, ranking", "", _table(summaries, TABLE3), "",
             "## Counts", "", markdown_table(["run", *COUNT_KEYS], [[n, *(s[k] for k in COUNT_KEYS)]
                                                                    for n, s in summaries.items()])]
    if paired:
        lines += ["", "## Paired differences against the first run (target bootstrap)", "",
                  markdown_table(["run", "metric", "difference", "interval"],
                                 [[f"{p['run']} − {p['baseline']}", p["metric"], f"{p['difference']:+.3f}",
                                   f"[{p['low']:+.3f}, {p['high']:+.3f}]"] for p in paired])]
    (out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    funnel_plot(summaries, out / "funnel.png")
    write_json(out / "manifest.json", {
        "created_at": now_utc(), "code_commit": code_commit(), "instances": str(instances.folder),
        "instances_manifest_sha256": sha256_file(instances.folder / "manifest.json"),
        "runs": {name: str(folder) for name, folder in runs.items()}, "scoring": config.model_dump(mode="json"),
        "view": view, "scorer_sha256": sha256_file(Path(__file__).with_name("scoring.py")), "summaries": summaries,
    })
    return summaries
