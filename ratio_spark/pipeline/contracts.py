"""What each pipeline stage reads, writes and may drop: plain declarations, no pyspark.

NeMo-Curator's ``inputs()``/``outputs()`` is the model. A ``StageContract`` names the tables (and the
columns of each) that a stage needs, the tables it writes (their columns are ``core.schema.TABLES``)
and, through ``core.schema.Reason``, the reasons it may drop rows for. ``pipeline/runner.py`` checks
the inputs before a stage starts and the outputs after it writes; the stage's code lives in
``pipeline/stages.py`` (named by ``implementation``, imported only when the stage runs).

This module is imported by ``ratio-spark --help`` (the stage commands' help lines) and by
``docs/tables.md``'s generator, so it must never import pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ratio_spark.core.errors import ReconciliationError
from ratio_spark.core.schema import REASONS, TABLES, reasons_of


@dataclass(frozen=True)
class StageContract:
    name: str
    help: str  # one line: the `ratio-spark <name>` help
    reads: dict[str, tuple[str, ...]] = field(default_factory=dict)  # table -> the columns the stage uses
    writes: tuple[str, ...] = ()  # tables it replaces; their columns are TABLES[name]
    drops_table: str | None = "drops"  # where its drops go (ingest: rejects); None: it drops nothing
    implementation: str = ""  # "module:function" taking a runner.StageIO, returning the summary

    @property
    def drop_reasons(self) -> tuple[str, ...]:
        return reasons_of(self.name)


_SENTENCE_COLUMNS_MINED = (
    "sentence_id", "paper_id", "pub_date", "section_idx", "para_idx", "sent_idx", "text", "norm_text", "norm_flag",
)

_CONTRACTS = [
    StageContract(
        name="ingest",
        help="read the configured inputs into papers and rejects (every input record lands in one of them)",
        writes=("papers",),
        drops_table="rejects",
        implementation="ratio_spark.pipeline.stages:ingest_stage",
    ),
    StageContract(
        name="segment",
        help="split the papers' paragraphs into sentences (Spark NLP in the JVM) and normalise them",
        reads={"papers": ("paper_id", "pub_date", "title", "sections")},
        writes=("sentences",),
        implementation="ratio_spark.pipeline.stages:segment_stage",
    ),
    StageContract(
        name="citations",
        help="bibliography entries and their in-text mentions into references, resolved to corpus papers",
        reads={"papers": ("paper_id", "pub_date", "title", "sections", "bibliography"),
               "sentences": ("sentence_id", "paper_id", "section_idx", "para_idx", "char_start")},
        writes=("references",),
        drops_table=None,  # every entry becomes a row; unresolved ones say why (resolution_status)
        implementation="ratio_spark.pipeline.stages:citations_stage",
    ),
    StageContract(
        name="mine",
        help="match lexicon markers over consecutive sentence pairs into mined_pairs (+ stats_mining)",
        reads={"sentences": _SENTENCE_COLUMNS_MINED},
        writes=("mined_pairs", "stats_mining"),
        implementation="ratio_spark.pipeline.stages:mine_stage",
    ),
    StageContract(
        name="pools",
        help="temporal splits, shared candidate pools (queries, candidates), leakage checks and stats_*",
        reads={"mined_pairs": TABLES["mined_pairs"].column_names, "stats_mining": ("pairs_examined",)},
        writes=("queries", "candidates", "stats_split_sizes", "stats_marker_matches", "stats_marker_sources",
                "stats_yield"),
        implementation="ratio_spark.pipeline.stages:pools_stage",
    ),
    StageContract(
        name="export",
        help="write the release: Parquet and JSONL per split, BEIR folders per move and split, its dataset card",
        reads={"queries": TABLES["queries"].column_names, "candidates": TABLES["candidates"].column_names,
               # copied into the release (stats/) and summarised in its dataset card
               **{name: TABLES[name].column_names for name in ("stats_split_sizes", "stats_yield", "stats_marker_matches")}},
        drops_table=None,
        implementation="ratio_spark.pipeline.stages:export_stage",
    ),
]
CONTRACTS: dict[str, StageContract] = {c.name: c for c in _CONTRACTS}
PIPELINE: tuple[str, ...] = tuple(CONTRACTS)  # the order of `ratio-spark run`
# An update's mine (pipeline/update.py): some papers mined again, their rows replaced; it also reads the rows
# it replaces and the counts it corrects.
MINE_PAPERS = replace(
    CONTRACTS["mine"],
    reads={**CONTRACTS["mine"].reads, "mined_pairs": TABLES["mined_pairs"].column_names,
           "drops": ("stage", "paper_id", "reason", "text"), "stats_mining": ("year", "pairs_examined")},
    implementation="ratio_spark.pipeline.stages:mine_papers_stage",
)


def writers_of(table: str) -> list[str]:
    """The stages that write ``table``; the first is the one to run when the table is missing."""
    return [
        c.name for c in CONTRACTS.values()
        if table in c.writes or table == c.drops_table or (table == "stats_drops" and c.drops_table)
    ]


def run_first(table: str) -> str:
    """The command(s) that write ``table``, for a message about it being missing: "`ratio-spark mine`"."""
    return " or ".join(f"`ratio-spark {w}`" for w in writers_of(table)) or "the stage that writes it"


def reconcile(stage: str, unit: str, received: int, outputs: dict[str, int], dropped: dict[str, int]) -> str:
    """Check ``received = sum(outputs) + sum(dropped)``; raise ``ReconciliationError`` naming every number.

    The three sides must be counted independently (the input as read, each output as written, the
    drops as written), or the check could never fail. Returns the balance as one line for the summary.
    """
    parts = [f"{n} {name}" for name, n in outputs.items()] + [f"{sum(dropped.values())} dropped"]
    accounted = sum(outputs.values()) + sum(dropped.values())
    if received != accounted:
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(dropped.items())) or "no drops"
        raise ReconciliationError(
            f"{stage}: {received} {unit} came in but {' + '.join(parts)} ({reasons}) = {accounted} are accounted "
            f"for ({received - accounted:+d} unexplained): a row was lost or made up without a drop"
        )
    return f"{received} {unit} = {' + '.join(parts)}"


# --------------------------------------------------------------------------------------------- catalogue


def table_catalogue() -> str:
    """``docs/tables.md``: every table with its writer, readers and columns, then every reason.

    Generated from ``CONTRACTS`` and ``core.schema``; ``tests/pipeline/test_contracts.py`` fails when the committed
    file differs (regenerate with ``python -m ratio_spark.pipeline.contracts > docs/tables.md``).
    """
    lines = [
        "# Tables and drop reasons",
        "",
        "<!-- Generated by `python -m ratio_spark.pipeline.contracts > docs/tables.md` from",
        "     ratio_spark/pipeline/contracts.py and ratio_spark/core/schema.py; do not edit by hand. -->",
        "",
        "Every stage reads and writes Delta tables under `tables.root` (`docs/architecture.md`). The runner checks",
        "a stage's inputs before it starts (the table exists and has the columns the stage reads) and its outputs",
        "after it writes (exactly the columns below, with these Spark types).",
        "",
        "## Stages",
        "",
        "| stage | reads (columns used) | writes | drops to |",
        "|---|---|---|---|",
    ]
    for c in CONTRACTS.values():
        reads = "<br>".join(
            f"`{t}` ({'all columns' if set(cols) == set(TABLES[t].column_names) else ', '.join(cols)})"
            for t, cols in c.reads.items()
        ) or "the configured inputs (`inputs:`)"
        writes = ", ".join(f"`{t}`" for t in c.writes) or "the release files"
        drops = f"`{c.drops_table}`, `stats_drops`" if c.drops_table else "nothing"
        lines.append(f"| `{c.name}` | {reads} | {writes} | {drops} |")
    for table in TABLES.values():
        writers = ", ".join(f"`{w}`" for w in writers_of(table.name)) or "`ratio-spark update` (`pipeline/update.py`)"
        readers = [c.name for c in CONTRACTS.values() if table.name in c.reads]
        lines += ["", f"## `{table.name}`", "", f"One row per {table.one_row_per}. Written by {writers}"
                  + (f"; read by {', '.join(f'`{r}`' for r in readers)}" if readers else "")
                  + (f"; partitioned by {', '.join(f'`{p}`' for p in table.partition_by)}" if table.partition_by else "")
                  + ".", "", "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{col.name}` | `{col.type}` | {col.meaning} |" for col in table.columns]
    lines += [
        "", "## Reasons", "",
        "Every code a stage writes to `rejects` (ingest), `drops` (the other stages) or, for kept rows, as a flag",
        "(`sentences.norm_flag`). `stats_drops` counts them per stage. A new reason is one line in",
        "`ratio_spark/core/schema.py` (`Reason`).", "",
        "| reason | stage | removes | meaning |", "|---|---|---|---|",
    ]
    lines += [f"| `{r.code}` | {r.stage} | {r.item + (' (kept, flagged)' if r.kept else '')} | {r.meaning} |"
              for r in REASONS.values()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table_catalogue(), end="")
