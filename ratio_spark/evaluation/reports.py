"""Write an evaluation to a results folder: tables people can read (Markdown) and load (CSV), plots (PNG),
the runs (TREC format) and a JSON summary.

```
<results>/
  results.md            MRR@10 per system and move, then one table per move (systems x all metrics, %), the
                        shape of the paper's Tables 1 and 8; bold = best in the column
  metrics.csv           long form: split, query_set, pool, pool_size, move, system, label, metric, value, queries
  results_wide.csv      full pool, one row per system, columns <move>/<metric> (%)
  per_query.csv         one row per (pool, move, system, query): gold id, gold rank (empty beyond the depth), metrics
  oracle.md, oracle.csv the oracle-pool table (the paper's Table 10 shape): full pool vs pools (a) and (b)
  recall_at_100.md/.csv first-stage Recall@100 and the reranking headroom
  overlap.md/.csv/.png  lexical overlap of the top k with the query, against the query-gold overlap (Figure 4)
  mrr10.png             MRR@10 per move and system
  runs/<system>/<move>.trec   the top-<depth> run of each system on the full pool (qid Q0 cid rank score system)
  intervals.md/.csv     each system's mean per metric with its paired-bootstrap confidence interval
  significance.md/.csv  every pair of systems, every metric: difference, its interval, permutation p-value
  funnel.md/.csv/.png   exposure, selection and ranking per pipeline (first stage alone, + rerank)
  summary.json          data counts, systems (prefixes, index, ANN recall), timings, headline MRR@10
```

In ``results.md`` a superscript letter after a value names each system (by its letter) that this row beats
significantly on that metric (paired permutation test, p < alpha; ``ratio_spark.evaluation.significance``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ratio_spark.core.markdown import markdown_table
from ratio_spark.evaluation.analyses import ORACLE_POOLS, first_stage_recall
from ratio_spark.evaluation.funnel import funnel_table, plot_funnel
from ratio_spark.evaluation.runner import MOVE_ORDER, EvaluationResult
from ratio_spark.evaluation.runs import run_folder_name
from ratio_spark.evaluation.metrics import metric_names
from ratio_spark.evaluation.significance import PairedComparison, SignificanceConfig, compare_systems

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def frame_markdown(frame: pd.DataFrame, bold_max: bool = True, digits: int = 1,
                   marks: dict[tuple[str, str], str] | None = None) -> str:
    """A DataFrame as a Markdown table (``core.markdown.markdown_table``): numeric columns formatted, the best of
    each column in bold; ``marks`` (row label,
    column) -> superscript text, e.g. the systems a row beats significantly."""
    columns = [str(c) for c in frame.columns]
    best = {}
    if bold_max:
        for c in frame.columns:
            if pd.api.types.is_numeric_dtype(frame[c]) and frame[c].nunique() > 1:
                best[str(c)] = frame[c].max()
    rows = []
    for idx, row in frame.iterrows():
        cells = []
        for c in frame.columns:
            value = row[c]
            if isinstance(value, float):
                text = "–" if pd.isna(value) else f"{value:.{digits}f}"
                if str(c) in best and not pd.isna(value) and value == best[str(c)]:
                    text = f"**{text}**"
                if marks and marks.get((str(idx), str(c))):
                    text += f"<sup>{marks[(str(idx), str(c))]}</sup>"
            else:
                text = str(value)
            cells.append(text)
        rows.append([idx, *cells])
    return markdown_table([frame.index.name or "", *columns], rows)


def _moves(result: EvaluationResult) -> list[str]:
    present = set(result.metrics["move"]) if not result.metrics.empty else set()
    return [m for m in MOVE_ORDER if m in present]


def _systems_order(result: EvaluationResult) -> list[str]:
    return [s["label"] for s in result.systems]


def per_move_table(result: EvaluationResult, move: str, pool: str = "full") -> pd.DataFrame:
    frame = result.metrics[(result.metrics["pool"] == pool) & (result.metrics["move"] == move)]
    table = frame.pivot_table(index="label", columns="metric", values="value", sort=False) * 100
    table = table[[m for m in metric_names(result.cutoffs) if m in table.columns]]
    table = table.reindex([label for label in _systems_order(result) if label in table.index])
    table.index.name = "system"
    return table


def wide_table(result: EvaluationResult) -> pd.DataFrame:
    parts = {move: per_move_table(result, move) for move in _moves(result)}
    wide = pd.concat(parts, axis=1)
    wide.columns = [f"{move}/{metric}" for move, metric in wide.columns]
    return wide


def _query_counts(result: EvaluationResult) -> dict[str, int]:
    full = result.metrics[result.metrics["pool"] == "full"]
    return full.groupby("move")["queries"].max().to_dict()


def _letters(result: EvaluationResult) -> dict[str, str]:
    return {s["name"]: LETTERS[i % len(LETTERS)] for i, s in enumerate(result.systems)}


def significance_marks(result: EvaluationResult, comparison: PairedComparison | None, move: str | None = None,
                       metric: str | None = None) -> dict[tuple[str, str], str]:
    """(row label, column) -> letters of the systems the row's system beats significantly. Columns are
    metrics (one move given) or moves (one metric given)."""
    if comparison is None or comparison.pairs.empty:
        return {}
    labels, letters = result.labels(), _letters(result)
    pairs = comparison.pairs[comparison.pairs["significant"]]
    pairs = pairs[pairs["move"] == move] if move else pairs[pairs["metric"] == metric]
    marks: dict[tuple[str, str], set[str]] = {}
    for row in pairs.itertuples(index=False):
        if row.difference == 0:
            continue
        better, worse = (row.system_a, row.system_b) if row.difference > 0 else (row.system_b, row.system_a)
        column = row.metric if move else row.move
        marks.setdefault((labels.get(better, better), column), set()).add(letters[worse])
    return {key: "".join(sorted(value)) for key, value in marks.items()}


def _lettered(table: pd.DataFrame, result: EvaluationResult) -> tuple[pd.DataFrame, dict]:
    by_label = {s["label"]: _letters(result)[s["name"]] for s in result.systems}
    return table.rename(index=lambda label: f"({by_label[label]}) {label}" if label in by_label else label), by_label


def _with_letters(marks: dict[tuple[str, str], str], by_label: dict[str, str]) -> dict[tuple[str, str], str]:
    return {(f"({by_label[label]}) {label}" if label in by_label else label, column): text
            for (label, column), text in marks.items()}


def results_markdown(result: EvaluationResult, comparison: PairedComparison | None = None,
                     alpha: float | None = None) -> str:
    counts = _query_counts(result)
    summary = result.data_summary
    head = [
        f"# Retrieval results: {result.split} split, {result.query_set} queries",
        "",
        f"Every query is ranked against the split's whole shared pool ({summary['pool_candidates']:,} candidates, "
        f"version `{summary['pool_version']}`), its own sentence excluded. Values in %. "
        f"R@k = Recall@k, M@k = MRR@k; M@10 is the primary metric. Bold: best in the column. "
        f"Source: `{summary['source']}`.",
        "",
        "Queries: " + ", ".join(f"{m} {counts.get(m, 0):,}" for m in MOVE_ORDER if m in summary["queries_by_move"]) + "."
        + (f" A seeded sample of at most {summary['query_sample']['per_move']} queries per move (seed "
           f"{summary['query_sample']['seed']}; left out: " + ", ".join(
               f"{m} {n:,}" for m, n in summary.get("queries_sampled_out", {}).items()) + "), scored by every system."
           if summary.get("query_sample") else ""),
        "",
        "## MRR@10",
        "",
    ]
    if comparison is not None and not comparison.pairs.empty:
        head[-2:-2] = [f"Superscript letters: the systems (by their letter) that a row beats significantly on that metric "
                       f"(paired sign-flip permutation test over queries, p < {alpha}); intervals in `intervals.md`, "
                       "every pairwise test in `significance.md`.", ""]
    mrr = result.table("M@10").reindex([s for s in _systems_order(result) if s in result.table("M@10").index])
    mrr, by_label = _lettered(mrr, result)
    mrr.index.name = "system"
    body = [frame_markdown(mrr, marks=_with_letters(significance_marks(result, comparison, metric="M@10"), by_label)), ""]
    for move in _moves(result):
        table, _ = _lettered(per_move_table(result, move), result)
        marks = _with_letters(significance_marks(result, comparison, move=move), by_label)
        body += [f"## {move.capitalize()} ({counts.get(move, 0):,} queries)", "", frame_markdown(table, marks=marks), ""]
    empty = [m for m, n in summary["queries_by_move"].items() if n == 0]
    if empty:
        body += [f"No queries for: {', '.join(empty)} (nothing to score).", ""]
    return "\n".join(head + body)


def oracle_table(result: EvaluationResult, metrics: tuple[str, ...] = ("R@1", "R@10", "R@100", "M@10")) -> pd.DataFrame:
    frame = result.metrics[result.metrics["metric"].isin(metrics)]
    table = frame.pivot_table(index=["move", "pool", "pool_size", "label"], columns="metric", values="value", sort=False) * 100
    table = table[[m for m in metrics if m in table.columns]].reset_index()
    pool_rank = {"full": 0, "oracle_a": 1, "oracle_b": 2}
    table["_m"] = table["move"].map({m: i for i, m in enumerate(MOVE_ORDER)})
    table["_p"] = table["pool"].map(pool_rank)
    table["_s"] = table["label"].map({s: i for i, s in enumerate(_systems_order(result))})
    return table.sort_values(["_m", "_p", "_s"]).drop(columns=["_m", "_p", "_s"]).reset_index(drop=True)


def oracle_markdown(result: EvaluationResult) -> str:
    table = oracle_table(result)
    lines = [
        f"# Oracle move filtering: {result.split} split, {result.query_set} queries",
        "",
        "The same queries, ranked against the full shared pool and against two oracle pools that hold only "
        "candidates of the queried move (the paper's appendix F.2, Table 10): " + "; ".join(
            f"{k.replace('oracle_', 'pool ')} = {v}" for k, v in ORACLE_POOLS.items()) +
        ". Values in %. Scores are comparable only within one pool. BM25 is re-indexed on each pool.",
        "",
    ]
    for move in _moves(result):
        for pool in ("full", "oracle_a", "oracle_b"):
            part = table[(table["move"] == move) & (table["pool"] == pool)]
            if part.empty:
                continue
            name = {"full": "full pool", "oracle_a": "pool (a)", "oracle_b": "pool (b)"}[pool]
            lines += [f"## {move.capitalize()}: {name}, {int(part['pool_size'].iloc[0]):,} candidates", "",
                      frame_markdown(part.drop(columns=["move", "pool", "pool_size"]).set_index("label").rename_axis("system")), ""]
    return "\n".join(lines)


def recall_markdown(result: EvaluationResult, k: int = 100) -> tuple[str, pd.DataFrame]:
    table = first_stage_recall(result.metrics, k)
    pivot = table.pivot_table(index="label", columns="move", values=f"R@{k}", sort=False) * 100
    pivot = pivot[[m for m in MOVE_ORDER if m in pivot.columns]]
    pivot = pivot.reindex([s for s in _systems_order(result) if s in pivot.index]).rename_axis("system")
    headroom = table.pivot_table(index="label", columns="move", values="rerank_headroom", sort=False) * 100
    headroom = headroom[[m for m in MOVE_ORDER if m in headroom.columns]]
    headroom = headroom.reindex([s for s in _systems_order(result) if s in headroom.index]).rename_axis("system")
    text = "\n".join([
        f"# First-stage Recall@{k}: {result.split} split, {result.query_set} queries",
        "",
        f"Share of queries (%) whose gold sentence is in the retriever's top {k} on the full pool. A reranker of "
        f"that top {k} cannot do better: its MRR@10 is at most Recall@{k}.",
        "",
        frame_markdown(pivot),
        "",
        f"## Headroom for a reranker: Recall@{k} - MRR@10 (points)",
        "",
        frame_markdown(headroom, bold_max=False),
        "",
    ])
    return text, table


def overlap_markdown(result: EvaluationResult) -> str:
    frame = result.overlap
    lines = [f"# Lexical overlap: {result.split} split, {result.query_set} queries", "",
             "Mean Jaccard similarity of stemmed, stopword-free unigrams between a query and its top-k candidates "
             "(the paper's F.1), and between a query and its gold sentence (last row).", ""]
    for move in _moves(result):
        part = frame[frame["move"] == move]
        systems = part[part["system"] != "gold"].pivot_table(index="label", columns="k", values="jaccard", sort=False)
        systems = systems.reindex([s for s in _systems_order(result) if s in systems.index])
        systems.columns = [f"k={k}" for k in systems.columns]
        gold = part[part["system"] == "gold"]["jaccard"]
        if not gold.empty:
            systems.loc["query-gold"] = [float(gold.iloc[0])] * len(systems.columns)
        lines += [f"## {move.capitalize()}", "", frame_markdown(systems.rename_axis("system"), bold_max=False, digits=3), ""]
    return "\n".join(lines)


def plot_overlap(result: EvaluationResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    moves = _moves(result)
    fig, axes = plt.subplots(1, len(moves), figsize=(4.2 * len(moves), 3.6), squeeze=False, sharey=True)
    frame = result.overlap
    for ax, move in zip(axes[0], moves):
        part = frame[frame["move"] == move]
        for label in _systems_order(result):
            line = part[part["label"] == label].sort_values("k")
            if not line.empty:
                ax.plot(line["k"], line["jaccard"], marker="o", markersize=3, label=label)
        gold = part[part["system"] == "gold"]["jaccard"]
        if not gold.empty:
            ax.axhline(float(gold.iloc[0]), color="black", linestyle="--", linewidth=1, label="query-gold")
        ax.set_xscale("log")
        ks = sorted(part[part["k"] > 0]["k"].unique())
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_title(f"{move.capitalize()} ({int(part['queries'].max())} queries)")
        ax.set_xlabel("top k")
    axes[0][0].set_ylabel("mean Jaccard with the query")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"Query-candidate lexical overlap by depth ({result.split}, {result.query_set} queries)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_mrr(result: EvaluationResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = result.table("M@10")
    table = table.reindex([s for s in _systems_order(result) if s in table.index])
    ax = table.T.plot.bar(figsize=(1.6 + 1.4 * len(table.columns) * max(1, len(table) / 3), 3.8), rot=0, width=0.8)
    ax.set_ylabel("MRR@10 (%)")
    ax.set_xlabel("")
    ax.set_title(f"MRR@10 on the full pool ({result.split}, {result.query_set} queries)", fontsize=10)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=130)
    plt.close(ax.figure)


INTERVAL_METRICS = ("M@10", "R@10", "R@100", "nDCG@10")


def intervals_markdown(result: EvaluationResult, comparison: PairedComparison, settings: SignificanceConfig) -> str:
    labels = result.labels()
    lines = [f"# Confidence intervals: {result.split} split, {result.query_set} queries", "",
             f"Mean over queries (%) and its {settings.confidence:.0%} paired-bootstrap percentile interval "
             f"({settings.bootstrap_samples:,} resamples of the queries, seed {settings.seed}; Koehn 2004). Every metric "
             "is in `intervals.csv`.", ""]
    frame = comparison.intervals
    for move in _moves(result):
        part = frame[(frame["move"] == move) & frame["metric"].isin(INTERVAL_METRICS)]
        if part.empty:
            continue
        cells = part.assign(text=[f"{100 * m:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]" for m, lo, hi in
                                  zip(part["mean"], part["ci_low"], part["ci_high"])])
        table = cells.pivot_table(index="system", columns="metric", values="text", aggfunc="first", sort=False)
        table = table[[m for m in INTERVAL_METRICS if m in table.columns]]
        table = table.reindex([s["name"] for s in result.systems if s["name"] in table.index])
        table.index = [labels.get(s, s) for s in table.index]
        table.index.name = "system"
        lines += [f"## {move.capitalize()} ({int(part['queries'].max()):,} queries)", "", frame_markdown(table, bold_max=False), ""]
    return "\n".join(lines)


def significance_markdown(result: EvaluationResult, comparison: PairedComparison, settings: SignificanceConfig,
                          metrics: tuple[str, ...] = ("M@10", "nDCG@10")) -> str:
    labels = result.labels()
    lines = [f"# Paired comparisons: {result.split} split, {result.query_set} queries", "",
             f"For every pair of systems (A, B): the difference of means A - B (points), its {settings.confidence:.0%} "
             f"paired-bootstrap interval ({settings.bootstrap_samples:,} resamples, seed {settings.seed}) and the "
             f"two-sided p-value of a paired sign-flip permutation test ({settings.permutations:,} permutations, "
             f"exact when 2^queries is fewer). Significant: p < {settings.alpha} (no correction for multiple "
             "comparisons). Every metric is in `significance.csv`.", ""]
    for move in _moves(result):
        for metric in metrics:
            part = comparison.pairs[(comparison.pairs["move"] == move) & (comparison.pairs["metric"] == metric)]
            if part.empty:
                continue
            table = pd.DataFrame({
                "A": [labels.get(a, a) for a in part["system_a"]], "B": [labels.get(b, b) for b in part["system_b"]],
                "A - B": [f"{100 * d:+.1f}" for d in part["difference"]],
                "interval": [f"[{100 * lo:+.1f}, {100 * hi:+.1f}]" for lo, hi in zip(part["ci_low"], part["ci_high"])],
                "p": [f"{p:.4f}" for p in part["p_value"]],
                "significant": ["yes" if v else "no" for v in part["significant"]],
            }).set_index("A")
            lines += [f"## {move.capitalize()}, {metric} ({int(part['queries'].max()):,} queries)", "",
                      frame_markdown(table, bold_max=False), ""]
    return "\n".join(lines)


FUNNEL_DISPLAY = [("exposed", "exposed"), ("selected", "selected"), ("gain_kept", "gain kept"),
                  ("mrr_at_10", "MRR@10"), ("ndcg_at_10", "nDCG@10"), ("rank_quality", "rank quality"),
                  ("mrr_at_10_exposed_only", "MRR@10, exposed only")]


def funnel_markdown(result: EvaluationResult, funnel: pd.DataFrame) -> str:
    lines = [f"# Funnel: {result.split} split, {result.query_set} queries", "",
             f"Per pipeline (a first stage alone, or a first stage whose top {result.window} an LLM reranks), over **all** "
             "queries, failures counted as zero (the Inspire paper's stage-wise evaluation). Values in %. "
             f"**exposed**: gold in the first stage's top {result.window} (what a reranker sees). **selected**: gold in "
             "the final top 10. **gain kept** = selected / exposed. **MRR@10**, **nDCG@10**: the final ranking. "
             "**rank quality** = nDCG@10 / selected. **MRR@10, exposed only**: the Ratio paper's view, over the queries "
             f"whose gold is in the top {result.window} (the queries a reranker is sent). Counts: queries not sent to "
             "the reranker (gold outside the window), failed (scored zero) and repaired (filled from first-stage order).",
             ""]
    for move in _moves(result):
        part = funnel[funnel["move"] == move]
        if part.empty:
            continue
        table = pd.DataFrame({title: part[column].to_numpy() * 100 for column, title in FUNNEL_DISPLAY},
                             index=part["label"].to_numpy())
        for column in ("not_sent", "failed", "repaired"):
            table[column.replace("_", " ")] = [str(v) if first else "–" for v, first in
                                              zip(part[column], part["first_stage"].notna())]
        table.index.name = "pipeline"
        lines += [f"## {move.capitalize()} ({int(part['queries'].max()):,} queries)", "", frame_markdown(table, bold_max=False), ""]
    return "\n".join(lines)


def write_runs(result: EvaluationResult, folder: Path) -> int:
    written = 0
    for (system, move), rankings in result.rankings.items():
        path = folder / run_folder_name(system) / f"{move}.trec"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            for qid in sorted(rankings):
                for rank, (cid, score) in enumerate(zip(rankings[qid].ids, rankings[qid].scores), start=1):
                    out.write(f"{qid} Q0 {cid} {rank} {score:.6f} {run_folder_name(system)}\n")
        written += 1
    return written


def write_results(result: EvaluationResult, folder: str | Path, extra_summary: dict | None = None,
                  significance: SignificanceConfig | None = None) -> dict[str, str]:
    """Write every table, plot and run; returns {what: path}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    significance = significance or SignificanceConfig()

    def put(name: str, text: str) -> None:
        (folder / name).write_text(text if text.endswith("\n") else text + "\n")
        written[name] = str(folder / name)

    def csv(name: str, frame: pd.DataFrame, **kw) -> None:
        frame.to_csv(folder / name, **kw)
        written[name] = str(folder / name)

    csv("metrics.csv", result.metrics, index=False)
    csv("per_query.csv", result.per_query, index=False)
    comparison = None
    if not result.metrics.empty:
        full = result.per_query[result.per_query["pool"] == "full"]
        comparison = compare_systems(full, metric_names(result.cutoffs), significance)
        csv("intervals.csv", comparison.intervals, index=False, float_format="%.6f")
        put("intervals.md", intervals_markdown(result, comparison, significance))
        csv("significance.csv", comparison.pairs, index=False, float_format="%.6g")
        put("significance.md", significance_markdown(result, comparison, significance))
        funnel = funnel_table(full, result.systems, result.window)
        csv("funnel.csv", funnel, index=False, float_format="%.6f")
        put("funnel.md", funnel_markdown(result, funnel))
        plot_funnel(funnel, folder / "funnel.png", _moves(result),
                    f"Funnel per pipeline ({result.split}, {result.query_set} queries; window {result.window})")
        written["funnel.png"] = str(folder / "funnel.png")
        put("results.md", results_markdown(result, comparison, significance.alpha))
        csv("results_wide.csv", wide_table(result), float_format="%.2f")
        plot_mrr(result, folder / "mrr10.png")
        written["mrr10.png"] = str(folder / "mrr10.png")
        if (result.metrics["pool"] != "full").any():
            put("oracle.md", oracle_markdown(result))
            csv("oracle.csv", oracle_table(result, tuple(metric_names(result.cutoffs))), index=False, float_format="%.2f")
        if 100 in result.cutoffs:
            text, table = recall_markdown(result)
            put("recall_at_100.md", text)
            csv("recall_at_100.csv", table, index=False, float_format="%.4f")
    if result.overlap is not None and (result.overlap["system"] != "gold").any():
        csv("overlap.csv", result.overlap, index=False, float_format="%.5f")
        put("overlap.md", overlap_markdown(result))
        plot_overlap(result, folder / "overlap.png")
        written["overlap.png"] = str(folder / "overlap.png")
    runs = write_runs(result, folder / "runs")
    written["runs"] = f"{folder / 'runs'} ({runs} files)"
    headline = {}
    if not result.metrics.empty:
        headline = {label: {move: round(v, 2) for move, v in row.items() if not pd.isna(v)}
                    for label, row in result.table("M@10").iterrows()}
    summary = {"split": result.split, "query_set": result.query_set, "data": result.data_summary,
               "mrr_at_10_percent": headline, "systems": result.systems, "timings_seconds": result.timings,
               "significance": significance.model_dump(), **(extra_summary or {})}
    put("summary.json", json.dumps(summary, indent=2, default=str))
    return written
