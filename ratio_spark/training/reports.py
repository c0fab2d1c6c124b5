"""Tables and plots of trained retrievers, in the paper's shapes.

* :func:`curves_frame` / :func:`plot_curves`: validation metrics per run, configuration and step, from the
  runs' ``training_summary.json`` (step 0 is the untuned model).
* :func:`baseline_tuned_table`: the paper's Table 1 / Table 7 shape from an evaluation's ``metrics.csv``:
  per move, BM25, each model's Baseline (untuned) row and its Tuned row (the model trained on *that* move),
  and the unified model; columns R@1, R@5, R@10, R@100, M@10, M@100.
* :func:`transfer_table`: the paper's F.3 shape: each per-move model on each move's queries, MRR@10 and the
  relative change over the untuned model.

Inputs are plain files (``metrics.csv`` of ``ratio-spark evaluate``, ``training_summary.json`` of
``ratio-spark train``), so the tables can be rebuilt without a model or a JVM.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ratio_spark.core.markdown import markdown_table
from ratio_spark.evaluation.reports import frame_markdown
from ratio_spark.evaluation.runner import MOVE_ORDER
from ratio_spark.training.evaluator import PRIMARY
from ratio_spark.training.settings import TrainingInputError

TABLE_METRICS = ("R@1", "R@5", "R@10", "R@100", "M@10", "M@100")


def load_runs(paths) -> list[dict]:
    """``training_summary.json`` of each run folder (or the file itself)."""
    runs = []
    for path in paths:
        path = Path(path)
        path = path / "training_summary.json" if path.is_dir() else path
        if not path.is_file():
            raise TrainingInputError(f"no training summary at {path}: give a run folder written by ratio-spark train")
        runs.append(json.loads(path.read_text()))
    return runs


def curves_frame(runs: list[dict]) -> pd.DataFrame:
    """Long form: run, configuration, epoch, step, metric, value (step 0 = the untuned model)."""
    rows = []
    for run in runs:
        for conf in run["configurations"]:
            points = ([{"epoch": 0.0, "step": 0, **run["baseline"]}] if run.get("baseline") else []) + conf["curve"]
            for point in points:
                for metric, value in point.items():
                    if metric in ("epoch", "step", "seconds"):
                        continue
                    rows.append({"run": run["name"], "configuration": conf["id"], "selected": conf["id"] == run["selected"],
                                 "epoch": point["epoch"], "step": point["step"], "metric": metric, "value": value})
    return pd.DataFrame(rows, columns=["run", "configuration", "selected", "epoch", "step", "metric", "value"])


def plot_curves(runs: list[dict], path: str | Path, metric: str = PRIMARY) -> None:
    """One panel per run: validation ``metric`` (%) against epochs, one line per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = curves_frame(runs)
    frame = frame[frame["metric"] == metric]
    names = list(dict.fromkeys(frame["run"]))
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(4.2 * max(1, len(names)), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        part = frame[frame["run"] == name]
        for conf, points in part.groupby("configuration", sort=False):
            points = points.sort_values("step")
            style = "-o" if points["selected"].iloc[0] else "--o"
            ax.plot(points["epoch"], 100 * points["value"], style, markersize=3, label=f"config {conf}")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("epoch (0 = untuned)")
        ax.set_ylabel(f"validation {metric} (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------------------ evaluation tables


def _evaluation(folder: str | Path) -> tuple[pd.DataFrame, list[dict], dict]:
    folder = Path(folder)
    if not (folder / "metrics.csv").is_file() or not (folder / "summary.json").is_file():
        raise TrainingInputError(f"{folder} is not a results folder of ratio-spark evaluate (metrics.csv, summary.json)")
    metrics = pd.read_csv(folder / "metrics.csv")
    summary = json.loads((folder / "summary.json").read_text())
    return metrics[metrics["pool"] == "full"], summary["systems"], summary


def _same_path(a: str | None, b: str | None) -> bool:
    return bool(a and b) and Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def tuned_system(run: dict, systems: list[dict]) -> str | None:
    """The evaluated system that is this run's model (by its folder), or None if it was not evaluated."""
    for system in systems:
        if system["name"] == run["evaluate_spec"] or _same_path(system.get("model_path"), run["model_dir"]):
            return system["name"]
    return None


def baseline_system(run: dict, systems: list[dict], baselines: dict[str, str]) -> str | None:
    """The untuned model with the run's prefix: ``baselines[base model]``, else ``dense:<base>:<prefix>``."""
    wanted = baselines.get(run["base_model"])
    for system in systems:
        if wanted is not None:
            if system["name"] == wanted:
                return system["name"]
        elif (system.get("prefix_mode") == run["prefix"]
              and (system.get("model") == run["base_model"] or _same_path(system.get("model_path"), run["base_model_path"]))):
            return system["name"]
    return None


def _value(metrics: pd.DataFrame, system: str | None, move: str, metric: str) -> float:
    if system is None:
        return float("nan")
    hit = metrics[(metrics["system"] == system) & (metrics["move"] == move) & (metrics["metric"] == metric)]
    return float(hit["value"].iloc[0]) * 100 if len(hit) else float("nan")


def baseline_tuned_rows(metrics: pd.DataFrame, systems: list[dict], runs: list[dict],
                        baselines: dict[str, str]) -> pd.DataFrame:
    """Long rows (move, row label, kind, system, metric, value %) in the paper's Table 1/7 shape: BM25, then
    per base model and prefix its Baseline, its Tuned row (in each move's column, the model trained on that
    move) and its Unified row."""
    from ratio_spark.evaluation.models import display_name

    labels = {s["name"]: s["label"] for s in systems}
    moves = [m for m in MOVE_ORDER if m in set(metrics["move"])]
    rows = []

    def add(label: str, kind: str, system_of_move: dict[str, str | None]) -> None:
        for move in moves:
            for metric in TABLE_METRICS:
                rows.append({"move": move, "row": label, "kind": kind, "system": system_of_move.get(move),
                             "metric": metric, "value": _value(metrics, system_of_move.get(move), move, metric)})

    for system in systems:
        if system["name"].startswith("bm25"):
            add(labels[system["name"]], "bm25", {m: system["name"] for m in moves})
    per_move_groups: dict[tuple[str, str], dict[str, dict]] = {}
    for run in runs:
        if run["mode"] == "per_move":
            per_move_groups.setdefault((run["base_model"], run["prefix"]), {})[run["moves"][0]] = run
    for (base, prefix), per_move in per_move_groups.items():
        name = f"{display_name(base)} ({prefix} prefix)"
        base_spec = baseline_system(next(iter(per_move.values())), systems, baselines)
        add(f"{name} Baseline", "baseline", {m: base_spec for m in moves})
        add(f"{name} Tuned", "tuned", {m: tuned_system(per_move[m], systems) if m in per_move else None for m in moves})
    for run in runs:
        if run["mode"] == "unified":
            name = f"{display_name(run['base_model'])} (per-move instruction)"
            base_spec = baseline_system(run, systems, baselines)
            add(f"{name} Baseline", "baseline", {m: base_spec for m in moves})
            add(f"{name} Unified", "unified", {m: tuned_system(run, systems) for m in moves})
    return pd.DataFrame(rows, columns=["move", "row", "kind", "system", "metric", "value"])


def transfer_rows(metrics: pd.DataFrame, systems: list[dict], runs: list[dict], baselines: dict[str, str]) -> pd.DataFrame:
    """The paper's F.3 shape: per base model, each model (untuned, trained on a move, unified) on each move's
    queries: MRR@10 (%) and the relative change over the untuned model."""
    from ratio_spark.evaluation.models import display_name

    moves = [m for m in MOVE_ORDER if m in set(metrics["move"])]
    rows = []
    by_base: dict[str, list[dict]] = {}
    for run in runs:
        by_base.setdefault(run["base_model"], []).append(run)
    for base, group in by_base.items():
        per_move = sorted((r for r in group if r["mode"] == "per_move"), key=lambda r: MOVE_ORDER.index(r["moves"][0]))
        if not per_move:
            continue
        untuned = baseline_system(per_move[0], systems, baselines)
        trained = [("untuned", untuned)] + [(f"trained on {r['moves'][0]}", tuned_system(r, systems)) for r in per_move]
        trained += [("unified", tuned_system(r, systems)) for r in group if r["mode"] == "unified"]
        for label, system in trained:
            for move in moves:
                value = _value(metrics, system, move, "M@10")
                reference = _value(metrics, untuned, move, "M@10")
                change = (value / reference - 1) * 100 if reference and not pd.isna(reference) else float("nan")
                rows.append({"model": display_name(base), "trained_on": label, "move": move, "system": system,
                             "mrr10": value, "change_percent": change})
    return pd.DataFrame(rows, columns=["model", "trained_on", "move", "system", "mrr10", "change_percent"])


def _table_markdown(rows: pd.DataFrame, move: str, not_run: list[str]) -> str:
    part = rows[rows["move"] == move]
    table = part.pivot_table(index="row", columns="metric", values="value", sort=False, dropna=False)
    table = table.reindex(columns=list(TABLE_METRICS))
    for label in not_run:
        table.loc[label] = float("nan")
    table.index.name = "system"
    return frame_markdown(table)


def _transfer_markdown(rows: pd.DataFrame) -> str:
    lines = []
    for model, part in rows.groupby("model", sort=False):
        moves = [m for m in MOVE_ORDER if m in set(part["move"])]
        rows = []
        for label, group in part.groupby("trained_on", sort=False):
            cells = []
            for move in moves:
                row = group[group["move"] == move].iloc[0]
                if pd.isna(row["mrr10"]):
                    cells.append("–")
                elif label == "untuned" or pd.isna(row["change_percent"]):
                    cells.append(f"{row['mrr10']:.1f}")
                else:
                    cells.append(f"{row['mrr10']:.1f} ({row['change_percent']:+.0f}%)")
            rows.append([label, *cells])
        lines += [f"**{model}**, MRR@10 (%) on each move's queries (change over the untuned model):", "",
                  markdown_table(["model", *(m.capitalize() for m in moves)], rows), ""]
    return "\n".join(lines)


def write_report(evaluation: str | Path, run_paths, out: str | Path, baselines: dict[str, str] | None = None,
                 not_run: list[str] | None = None) -> dict[str, str]:
    """``training_results.md`` (Table 1/7 shape per move, headline MRR@10, transfer), the CSVs and the curves."""
    metrics, systems, summary = _evaluation(evaluation)
    runs = load_runs(run_paths)
    baselines = baselines or {}
    not_run = not_run or []
    rows = baseline_tuned_rows(metrics, systems, runs, baselines)
    transfer = transfer_rows(metrics, systems, runs, baselines)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    moves = [m for m in MOVE_ORDER if m in set(rows["move"])]
    data = summary["data"]
    counts = data["queries_by_move"]
    head = rows[rows["metric"] == "M@10"].pivot_table(index="row", columns="move", values="value", sort=False,
                                                      dropna=False).reindex(columns=moves)
    for label in not_run:
        head.loc[label] = float("nan")
    head.index.name = "system"
    text = [
        f"# Fine-tuned retrievers: {summary['split']} split, {summary['query_set']} queries",
        "",
        f"Every query is ranked against the split's whole shared pool ({data['pool_candidates']:,} candidates), its own "
        "sentence excluded. Values in %. Baseline: the model before fine-tuning, with the prefix it is trained with; "
        "Tuned: in each move's column, the model fine-tuned on that move; Unified: one model fine-tuned on all "
        "moves, each query with its move's instruction. R@k = Recall@k, M@k = MRR@k; M@10 is primary. "
        f"Queries: {', '.join(f'{m} {counts.get(m, 0):,}' for m in moves)}. Source: `{data['source']}`.",
        "",
        "## MRR@10",
        "",
        frame_markdown(head),
        "",
    ]
    for move in moves:
        text += [f"## {move.capitalize()} ({counts.get(move, 0):,} queries)", "", _table_markdown(rows, move, not_run), ""]
    if not transfer.empty:
        text += ["## Cross-move transfer (the paper's F.3)", "", _transfer_markdown(transfer)]
    if not_run:
        text += [f"Not run here: {', '.join(not_run)} (docs/training.md says why, with the commands).", ""]
    written = {}
    (out / "training_results.md").write_text("\n".join(text))
    written["training_results.md"] = str(out / "training_results.md")
    rows.to_csv(out / "training_results.csv", index=False, float_format="%.2f")
    written["training_results.csv"] = str(out / "training_results.csv")
    transfer.to_csv(out / "transfer.csv", index=False, float_format="%.2f")
    written["transfer.csv"] = str(out / "transfer.csv")
    curves_frame(runs).to_csv(out / "curves.csv", index=False)
    written["curves.csv"] = str(out / "curves.csv")
    plot_curves(runs, out / "curves.png")
    written["curves.png"] = str(out / "curves.png")
    return written
