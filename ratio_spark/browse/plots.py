"""The browser's plots as PNG bytes (matplotlib, Agg; served by the app itself, no CDN): split sizes, the most
frequent markers of each move, and the yield of each move."""

from __future__ import annotations

import io
from collections import Counter

from ratio_spark.browse.data import Benchmark
from ratio_spark.core.schema import MOVES, SPLITS

TOP_MARKERS = 10


def _png(fig) -> bytes:
    out = io.BytesIO()
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out.getvalue()


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def split_sizes(benchmark: Benchmark) -> bytes:
    """Queries of each move per split, the pool size written above each split."""
    plt = _pyplot()
    splits = [s for s in SPLITS if s in benchmark.manifest["splits"]]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(MOVES)
    for i, move in enumerate(MOVES):
        counts = [benchmark.manifest["splits"][s]["queries_by_move"].get(move, 0) for s in splits]
        bars = ax.bar([x + i * width for x in range(len(splits))], counts, width, label=move)
        ax.bar_label(bars, fontsize=8)
    ax.set_xticks([x + width for x in range(len(splits))],
                  [f"{s}\npool {benchmark.manifest['splits'][s]['candidates']:,}" for s in splits])
    ax.set_ylabel("queries")
    ax.set_title("Split sizes: queries per move, candidates in each shared pool")
    ax.legend(frameon=False)
    return _png(fig)


def markers(benchmark: Benchmark) -> bytes:
    """The most frequent markers of each move over the release's queries (all splits)."""
    plt = _pyplot()
    by_move = {m: Counter(q.marker for _, q in benchmark.queries.values() if q.move == m and q.marker) for m in MOVES}
    fig, axes = plt.subplots(1, len(MOVES), figsize=(11, 3.8))
    for ax, move in zip(axes, MOVES):
        top = by_move[move].most_common(TOP_MARKERS)[::-1]
        ax.barh([m for m, _ in top], [n for _, n in top])
        total = sum(by_move[move].values())
        ax.set_title(f"{move}: {total} quer{'y' if total == 1 else 'ies'}", fontsize=10)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.tick_params(axis="y", labelsize=8)
        if not top:
            ax.text(0.5, 0.5, "no queries", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(f"Top {TOP_MARKERS} markers per move")
    return _png(fig)


def yields(benchmark: Benchmark) -> bytes | None:
    """Distinct pairs per 1,000 consecutive pairs examined, per move (``stats/stats_yield.jsonl``); None without it."""
    rows = {r["label"]: r for r in benchmark.stats.get("stats_yield", []) if r.get("role") == "move"}
    if not rows:
        return None
    plt = _pyplot()
    labels = [m for m in (*MOVES, "all") if m in rows]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    bars = ax.bar(labels, [rows[m]["pairs_per_1000"] for m in labels])
    ax.bar_label(bars, labels=[f"{rows[m]['pairs_per_1000']:.2f}" for m in labels], fontsize=8)
    ax.set_ylabel("pairs per 1,000 examined")
    examined = max(r.get("consecutive_pairs_examined") or 0 for r in rows.values())
    ax.set_title(f"Yield of the mined pairs ({examined:,} consecutive pairs examined)")
    return _png(fig)


def all_plots(benchmark: Benchmark) -> dict[str, bytes]:
    plots = {"split-sizes": split_sizes(benchmark), "markers": markers(benchmark)}
    if (png := yields(benchmark)) is not None:
        plots["yield"] = png
    return plots
