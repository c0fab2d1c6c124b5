"""The pipeline's stages, one ``Stage`` class each (``pipeline/stage.py``), and their registry.

Each class declares what it reads, writes, drops and configures, and does its work in ``process``; the runner
(``runner.run_stage(spark, config, "mine")``) checks the declarations, reconciles the balances ``process``
returns and writes the summary. ``STAGES`` (name -> stage, in the order of ``ratio-spark run``) is what the
command line, the jobs, the pre-flight checks and ``docs/tables.md`` read.

Nothing here imports pyspark at import time (``ratio-spark --help``, the Python half): each ``process``
imports what it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ratio_spark.core.markdown import markdown_table
from ratio_spark.core.schema import MOVES, REASONS, TABLES, reasons_of
from ratio_spark.pipeline.stage import Balance, Outcome, Stage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Ingest(Stage):
    """Inputs -> ``papers`` + ``rejects``; every input record lands in exactly one of them."""

    name = "ingest"
    help = "read the configured inputs into papers and rejects (every input record lands in one of them)"
    writes = ("papers",)
    drops_table = "rejects"
    settings = "ingest"

    def process(self, io) -> Outcome:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        from ratio_spark.pipeline.ingest import ingest

        inputs = io.config.inputs
        io.log(f"reading {len(inputs)} input(s): " + ", ".join(f"{i.name} ({i.format})" for i in inputs))
        result = ingest(io.spark, io.config)
        records = result.records.persist(StorageLevel.MEMORY_AND_DISK)  # papers and rejects reuse it
        try:
            with io.phase("reading and parsing every input unit"):
                by_format = {r["source_format"]: r["count"] for r in records.groupBy("source_format").count().collect()}
            with io.phase("writing papers"):
                papers = io.write("papers", result.papers)
            with io.phase("writing rejects"):
                io.write_drops(result.rejects)
        finally:
            records.unpersist()
        n_papers = papers.count()
        return Outcome(
            counts={
                "input_records": sum(by_format.values()),
                "input_records_by_format": by_format,
                "papers": n_papers,
                "papers_by_year": {
                    str(r["year"]): r["count"]
                    for r in papers.groupBy(F.year("pub_date").alias("year")).count().orderBy("year").collect()
                },
                "papers_by_date_source": {r["date_source"]: r["count"]
                                          for r in papers.groupBy("date_source").count().collect()},
            },
            balances=[Balance("input records", sum(by_format.values()), {"papers": n_papers})],
        )


class Segment(Stage):
    """``papers`` -> ``sentences`` (``segment.engine``: the rules over Arrow batches, or Spark NLP in the JVM); a
    paper with no sentence is a drop, a bad sentence is kept with its ``norm_flag``."""

    name = "segment"
    help = "split the papers' paragraphs into sentences (segment.engine: rules or Spark NLP) and normalise them"
    reads = {"papers": ("paper_id", "pub_date", "title", "sections")}
    writes = ("sentences",)
    settings = "segment"

    def process(self, io) -> Outcome:
        from pyspark.sql import functions as F

        from ratio_spark.core.errors import ContractError
        from ratio_spark.pipeline.segment import papers_without_sentences, segment_papers

        papers = io.read("papers")
        engine = {"rules": "the rules engine", "sparknlp": "Spark NLP's SentenceDetector"}[io.settings.engine]
        with io.phase(f"splitting paragraphs into sentences ({engine}) and writing them"):
            sentences = io.write("sentences", segment_papers(papers, io.settings))
        row = sentences.agg(F.count("*").alias("sentences"), F.countDistinct("paper_id").alias("papers")).first()
        flags = {r["norm_flag"]: r["count"] for r in sentences.groupBy("norm_flag").count().collect()}
        clean = flags.pop(None, 0)
        unknown = sorted(set(flags) - set(reasons_of("segment", kept=True)))
        if unknown:
            raise ContractError(f"segment flagged sentences with undeclared reason(s) {unknown} (core/schema.py Reason)")
        io.write_drops(papers_without_sentences(papers, sentences))
        n_papers = papers.count()
        return Outcome(
            counts={
                "papers": n_papers,
                "papers_with_sentences": row["papers"],
                "sentences": row["sentences"],
                "clean_sentences": clean,
                "flagged_by_reason": flags,  # kept in `sentences`, marked; mining skips them
            },
            balances=[Balance("papers", n_papers, {"papers_with_sentences": row["papers"]})],
        )


class Citations(Stage):
    """``papers`` (their ``bibliography``) + ``sentences`` -> ``references``: one row per bibliography entry,
    with its mention sentences and the corpus paper it cites (``pipeline/citations.py``)."""

    name = "citations"
    help = "bibliography entries and their in-text mentions into references, resolved to corpus papers"
    reads = {"papers": ("paper_id", "pub_date", "title", "sections", "bibliography"),
             "sentences": ("sentence_id", "paper_id", "section_idx", "para_idx", "char_start")}
    writes = ("references",)
    drops_table = None  # every entry becomes a row; unresolved ones say why (resolution_status)
    settings = "citations"

    def process(self, io) -> Outcome:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        from ratio_spark.pipeline.citations import build_references, citations_summary

        # Persisted, without the sections' paragraphs: the mentions, the entries, the corpus the entries resolve
        # to and the summary all read the papers, whose nested bibliography is then decoded from Parquet once.
        papers = io.read("papers").select(
            "paper_id", "pub_date", "title", F.transform("sections", lambda s: F.struct(s["heading"].alias("heading")))
            .alias("sections"), "bibliography",
        ).persist(StorageLevel.MEMORY_AND_DISK)
        references, outcomes = build_references(papers, io.read("sentences"), io.settings)
        # Persisted: the references and the summary's counts both read the mentions placed in sentences, so
        # the sentences are read and joined once.
        outcomes = outcomes.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            with io.phase("locating mentions in sentences, resolving bibliography entries and writing references"):
                written = io.write("references", references)
            counts = citations_summary(papers, written, outcomes)
            entries = papers.select(F.sum(F.size(F.coalesce("bibliography.entries", F.array())))).first()[0] or 0
        finally:
            outcomes.unpersist()
            papers.unpersist()
        return Outcome(counts, [Balance("bibliography entries", entries, {"references": counts["bibliography_entries"]})])


_SENTENCE_COLUMNS_MINED = (
    "sentence_id", "paper_id", "pub_date", "section_idx", "para_idx", "sent_idx", "text", "norm_text", "norm_flag",
)


class Mine(Stage):
    """``sentences`` -> ``mined_pairs`` (+ ``stats_mining``): marker matching over consecutive pairs."""

    name = "mine"
    help = "match lexicon markers over consecutive sentence pairs into mined_pairs (+ stats_mining)"
    reads = {"sentences": _SENTENCE_COLUMNS_MINED}
    writes = ("mined_pairs", "stats_mining")
    settings = "mining"
    files = {"lexicon": "mining.lexicon"}

    def process(self, io) -> Outcome:
        from ratio_spark.lexicon.loader import load_lexicon
        from ratio_spark.pipeline.mine import mine_pairs
        from ratio_spark.pipeline.tables import table_location

        lexicon = load_lexicon(io.file("lexicon"))
        io.log(f"lexicon {lexicon.version} ({len(lexicon.markers)} markers), matching consecutive pairs")
        with io.phase("forming, matching and cutting the pairs, counting them per year"):
            mining = mine_pairs(io.spark, io.read("sentences"), lexicon, io.settings,
                                table=table_location(io.config, "sentences"))
            # Persisted by mine_pairs: the pass that forms, matches and cuts the pairs (the counts per year, the rows
            # and the drops read it), so the sentences are read once. The de-duplication is not persisted: the rows
            # and the drops each run it over the persisted pass, which costs less than caching its wide rows
            # (docs/performance.md, "Mining: the rules in the pass").
            scanned = mining.scanned
            examined_by_year = {r["year"]: r["count"] for r in mining.examined.collect()}
        io.log(mining.pairing)
        n_matched = mining.n_matched
        try:
            written = io.phases({
                "writing mined_pairs": lambda: io.write("mined_pairs", mining.mined),
                "writing the dropped pairs": lambda: io.write_drops(mining.drops),
                "writing stats_mining": lambda: _write_stats_mining(io, lexicon.version, examined_by_year),
            })["writing mined_pairs"]
        finally:
            scanned.unpersist()
        counts = {**_mined_summary(lexicon.version, examined_by_year, written), "pairs_opening_with_a_marker": n_matched}
        return Outcome(counts, [Balance("pairs opening with a marker", n_matched, {"mined_pairs": counts["mined_pairs"]})])


class MinePapers(Mine):
    """An update's mine (``pipeline/update.py``): only ``papers`` (the new and changed ones, their sentences
    already in ``sentences``) and the papers that share a (query, gold) text with them are mined, against the
    pairs the other papers keep, and replace those papers' rows of ``mined_pairs`` and ``drops``.

    Why the other papers: the duplicate rule keeps the smallest pair id of a text. A new pair with a smaller
    id than a kept pair of the same text makes that one a duplicate, and a changed paper's kept pair that is
    gone lets a duplicate of it be kept; mining every paper holding that text again re-ranks them all (a
    second pass, only when there are such papers). The rows of any other paper stay as they are: a kept pair
    of such a paper that would lose its place (``Mining.displaced``) fails the stage before it writes.
    ``examined_before``: year -> consecutive pairs of the old sentences of ``papers`` (``stats_mining`` is
    corrected by the difference). It also reads the rows it replaces and the counts it corrects.
    """

    reads = {**Mine.reads, "mined_pairs": TABLES["mined_pairs"].column_names,
             "drops": ("stage", "paper_id", "reason", "text"), "stats_mining": ("year", "pairs_examined")}

    def process(self, io, papers: list[str], examined_before: dict) -> Outcome:  # type: ignore[override]
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        from ratio_spark.core.errors import ReconciliationError
        from ratio_spark.lexicon.loader import load_lexicon
        from ratio_spark.pipeline.mine import mine_pairs, papers_sharing_texts
        from ratio_spark.pipeline.tables import in_predicate, table_location

        lexicon = load_lexicon(io.file("lexicon"))
        sentences, mined_pairs = io.read("sentences"), io.read("mined_pairs")
        mine_drops = io.read("drops").filter(F.col("stage") == "mine")

        def mine_again(ids: list[str]):
            where = in_predicate("paper_id", ids)
            return where, mine_pairs(io.spark, sentences.filter(where), lexicon, io.settings,
                                     kept_elsewhere=mined_pairs.filter(f"NOT ({where})"))

        def rows_and_matching(frame, where: str) -> tuple[int, int]:
            row = frame.agg(F.count("*").alias("rows"), F.count(F.when(F.expr(where), 1)).alias("matching")).first()
            return row["rows"], row["matching"]

        where, mining = mine_again(papers)
        scanned = mining.scanned  # persisted by mine_pairs
        matched = mining.matched.persist(StorageLevel.MEMORY_AND_DISK)
        remined = list(papers)
        try:
            with io.phase(f"mining the {len(papers)} new or changed paper(s), finding the papers that share their texts"):
                examined_now = {r["year"]: r["count"] for r in mining.examined.collect()}
                texts = matched.filter(F.col("drop_reason").isNull()).select(
                    F.col("query_cut").alias("query_text"), F.col("gold_cut").alias("gold_text")
                ).unionByName(mined_pairs.filter(where).select("query_text", "gold_text")).distinct()
                sharing = {r["paper_id"] for r in papers_sharing_texts(mined_pairs, mine_drops, texts).collect()} - set(papers)
            if sharing:
                matched.unpersist()
                remined = sorted(set(papers) | sharing)
                where, mining = mine_again(remined)
                matched = mining.matched.persist(StorageLevel.MEMORY_AND_DISK)
            with io.phase(f"de-duplicating the pairs of {len(remined)} paper(s) against the others' kept pairs"):
                n_matched = mining.n_matched
                displaced = mining.displaced.limit(3).collect()
                before = {"mined_pairs": rows_and_matching(mined_pairs, where), "drops": rows_and_matching(mine_drops, where)}
                staged_rows = {"mined_pairs": mining.mined.count(), "drops": mining.drops.count()}
            if displaced:
                raise ReconciliationError(
                    "mine (update): pair(s) " + ", ".join(f"{r['pair_id']} (now a duplicate of {r['_first_pair_id']})"
                                                          for r in displaced)
                    + f" of papers outside the {len(remined)} mined again would change: the papers sharing a text were "
                    "not all mined again (mine.papers_sharing_texts)")
            with io.phase("replacing their rows of mined_pairs and drops"):
                written = io.write("mined_pairs", mining.mined, replace_where=where)
                io.write_drops(mining.drops, replace_where=where)
        finally:
            matched.unpersist()
            scanned.unpersist()
            mining.scanned.unpersist()  # a second mine's pass
        drops_now = io.spark.read.format("delta").load(table_location(io.config, "drops")).filter(F.col("stage") == "mine")
        after = {"mined_pairs": rows_and_matching(written, where)}
        here = {r["reason"]: r["count"] for r in drops_now.filter(where).groupBy("reason").count().collect()}
        after["drops"] = (sum(io.dropped_by_reason().values()), sum(here.values()))
        balances = [Balance(f"{name} rows (before - replaced + mined again)",
                            before[name][0] - before[name][1] + staged_rows[name], {name: after[name][0]}, {}, "update")
                    for name in before]
        balances.append(Balance(f"pairs of the {len(remined)} paper(s) opening with a marker", n_matched,
                                {"mined_pairs": after["mined_pairs"][1]}, here, "update"))
        examined = {r["year"]: r["pairs_examined"] for r in io.read("stats_mining").collect()}
        for year in set(examined_now) | set(examined_before):
            examined[year] = examined.get(year, 0) + examined_now.get(year, 0) - examined_before.get(year, 0)
        examined = {year: n for year, n in examined.items() if n}
        _write_stats_mining(io, lexicon.version, examined)
        counts = {
            **_mined_summary(lexicon.version, examined, written),
            "papers_new_or_changed": len(papers),
            "papers_sharing_a_text": len(sharing),
            "papers_mined": len(remined),
            "paper_ids_mined": remined,
        }
        return Outcome(counts, balances)


def _write_stats_mining(io, lexicon_version: str, examined_by_year: dict) -> None:
    """Write ``stats_mining``: one row per publication year (yields by year need the pairs examined in that year)."""
    stats = io.spark.createDataFrame(
        [(lexicon_version, year, n) for year, n in sorted(examined_by_year.items(), key=lambda kv: (kv[0] is None, kv[0]))],
        "lexicon_version string, year int, pairs_examined bigint",
    )
    io.write("stats_mining", stats)


def _mined_summary(lexicon_version: str, examined_by_year: dict, mined: DataFrame) -> dict[str, Any]:
    """The summary's counts of ``mined`` (the ``mined_pairs`` table as written)."""
    from pyspark.sql import functions as F

    by_label = {
        f"{r['role']}:{r['label']}": r["count"]
        for r in mined.groupBy("role", F.coalesce("move", "category").alias("label")).count().collect()
    }
    return {
        "lexicon_version": lexicon_version,
        "consecutive_pairs_examined": sum(examined_by_year.values()),
        "mined_pairs": sum(by_label.values()),
        "mined_by_move_or_category": dict(sorted(by_label.items())),
    }


class Pools(Stage):
    """``mined_pairs`` -> temporal splits, shared candidate pools (``queries``, ``candidates``), leakage checks, ``stats_*``.

    ``splits`` (an update): build and replace only these splits' queries, candidates and drops (and the drops
    of pairs in no split); the counts, their reconciliation, the leakage checks and the statistics still
    cover every split, as written."""

    name = "pools"
    help = "temporal splits, shared candidate pools (queries, candidates), leakage checks and stats_*"
    reads = {"mined_pairs": TABLES["mined_pairs"].column_names, "stats_mining": ("pairs_examined",)}
    writes = ("queries", "candidates", "stats_split_sizes", "stats_marker_matches", "stats_marker_sources",
              "stats_yield")
    settings = "splits"

    def process(self, io, splits: tuple[str, ...] | None = None) -> Outcome:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        from ratio_spark.pipeline.leakage import check_leakage
        from ratio_spark.pipeline.pools import build_pools, pool_counts, summarise_pools
        from ratio_spark.pipeline.splits import assign_splits, resolve_splits
        from ratio_spark.pipeline.stats import mined_pair_stats, stats_split_sizes
        from ratio_spark.pipeline.tables import in_predicate

        # Persisted: the splits, their summary, the pools, the counts and the statistics all read the mined pairs.
        mined = io.read("mined_pairs").persist(StorageLevel.MEMORY_AND_DISK)
        try:
            ranges = resolve_splits(mined, io.settings)
            if ranges is not io.settings:
                io.log("rolling splits: " + ", ".join(f"{n} {r.start}..{r.end}" for n, r in ranges.ranges().items()))
            with io.phase("assigning temporal splits"):
                assignment = assign_splits(mined, ranges)
                split_summary = assignment.summary()
            build = build_pools(assignment.pairs, splits=splits)
            where = None if splits is None else in_predicate("split", splits)
            pairs_examined = io.read("stats_mining").agg(F.sum("pairs_examined")).first()[0]
            frames = mined_pair_stats(mined, pairs_examined)
            try:
                # Independent writes side by side: the pools, their drops and the statistics of the mined pairs.
                written = io.phases({
                    "building and writing the queries and the shared candidate pool of "
                    + ("each split" if splits is None else f"split(s) {', '.join(splits) or '(none)'}"):
                        lambda: io.write_all({"queries": build.queries, "candidates": build.candidates},
                                             replace_where=where),
                    # A union of a dozen small frames: one file per core, not one per partition of each.
                    "writing what the pools dropped": lambda: io.write_drops(
                        assignment.drops.unionByName(build.drops).coalesce(io.spark.sparkContext.defaultParallelism),
                        replace_where=where and f"split IS NULL OR {where}"),
                    f"writing the statistics tables ({', '.join(frames)})": lambda: io.write_all(frames),
                })
            finally:
                build.unpersist()
            pools, drops, stats = written.values()
            queries, candidates = pools["queries"], pools["candidates"]
            # Then, side by side, what reads the tables as written: the counts (stats_split_sizes and the
            # reconciliation are built from them) and the leakage checks.

            def count_and_write_split_sizes() -> tuple[dict, dict]:
                counts = pool_counts(queries, candidates)
                io.write("stats_split_sizes", stats_split_sizes(io.spark, *counts))
                return counts

            checked = io.phases({
                "counting what the pools kept and writing stats_split_sizes": count_and_write_split_sizes,
                "leakage checks": lambda: check_leakage(queries, candidates, ranges),
            })
            (query_counts, candidate_counts), leakage = checked.values()
            pool_summary = summarise_pools(assignment.rows_by_split_and_role(), query_counts, candidate_counts, drops)
            yields = {
                r["label"]: {"pairs": r["pairs"], "per_1000_pairs": round(r["pairs_per_1000"], 3)}
                for r in stats["stats_yield"].collect()
                if r["role"] == "move"
            }
            matches = stats["stats_marker_matches"].filter(F.col("role") == "move").collect()
            top_markers = {
                move: {r["marker_entry"]: r["pairs"]
                       for r in sorted((r for r in matches if r["label"] == move), key=lambda r: -r["pairs"])[:5]}
                for move in MOVES
            }
            markers_matched = {
                f"{r['label']} ({r['marker_source']})": r["markers_matched"]
                for r in stats["stats_marker_sources"].filter(F.col("role") == "move").collect()
            }
            counts = {
                **{k: v for k, v in split_summary.items() if k != "pairs_by_split"},
                "pairs_by_split": split_summary["pairs_by_split"],
                "splits": pool_summary["splits"],
                "yield_per_1000_consecutive_pairs": yields,
                "consecutive_pairs_examined": pairs_examined,
                "markers_with_matches_by_move_and_source": markers_matched,
                "top_markers_by_move": top_markers,
                **leakage,
            }
            return Outcome(counts, pool_summary["balances"])
        finally:
            mined.unpersist()


class Export(Stage):
    """``queries`` + ``candidates`` -> the release: Parquet and JSONL per split, BEIR folders per move and split."""

    name = "export"
    help = "write the release: Parquet and JSONL per split, BEIR folders per move and split, its dataset card"
    reads = {"queries": TABLES["queries"].column_names, "candidates": TABLES["candidates"].column_names,
             # copied into the release (stats/) and summarised in its dataset card
             **{name: TABLES[name].column_names for name in ("stats_split_sizes", "stats_yield", "stats_marker_matches")}}
    drops_table = None
    settings = "release"

    def process(self, io) -> Outcome:
        from ratio_spark.pipeline.dataset_card import STATS_TABLES
        from ratio_spark.pipeline.export import export_release, release_about

        root = io.settings.root
        queries, candidates = io.read("queries"), io.read("candidates")
        stats = {name: [row.asDict() for row in io.read(name).collect()] for name in STATS_TABLES}  # a few rows each
        with io.phase(f"writing the release to {root}"):
            manifest = export_release(queries, candidates, root, about=release_about(io.config, stats))
        released = manifest.get("splits", {})
        counts = {
            "release": root,
            "splits": released,
            "beir_folders": sum(len(splits) for splits in manifest.get("beir", {}).values()),
            "beir_skipped": manifest.get("beir_skipped", []),
        }
        return Outcome(counts, [Balance(name, table.count(), {"released": sum(s[name] for s in released.values())}, part=name)
                                for name, table in (("queries", queries), ("candidates", candidates))])


# --------------------------------------------------------------------------------------------- the registry

STAGES: dict[str, Stage] = {stage.name: stage for stage in (Ingest(), Segment(), Citations(), Mine(), Pools(), Export())}
PIPELINE: tuple[str, ...] = tuple(STAGES)  # the order of `ratio-spark run`
MINE_PAPERS = MinePapers()


def writers_of(table: str) -> list[str]:
    """The stages that write ``table``; the first is the one to run when the table is missing."""
    return [
        s.name for s in STAGES.values()
        if table in s.writes or table == s.drops_table or (table == "stats_drops" and s.drops_table)
    ]


def run_first(table: str) -> str:
    """The command(s) that write ``table``, for a message about it being missing: "`ratio-spark mine`"."""
    return " or ".join(f"`ratio-spark {w}`" for w in writers_of(table)) or "the stage that writes it"


def table_catalogue() -> str:
    """``docs/tables.md``: every table with its writer, readers and columns, then every reason.

    Generated from ``STAGES`` and ``core.schema``; ``tests/pipeline/test_contracts.py`` fails when the committed
    file differs (regenerate with ``python -m ratio_spark.pipeline.stages > docs/tables.md``).
    """
    lines = [
        "# Tables and drop reasons",
        "",
        "<!-- Generated by `python -m ratio_spark.pipeline.stages > docs/tables.md` from",
        "     ratio_spark/pipeline/stages.py and ratio_spark/core/schema.py; do not edit by hand. -->",
        "",
        "Every stage reads and writes Delta tables under `tables.root` (`docs/architecture.md`). The runner checks",
        "a stage's inputs before it starts (the table exists and has the columns the stage reads) and its outputs",
        "after it writes (exactly the columns below, with these Spark types).",
        "",
        "## Stages",
        "",
    ]
    rows = []
    for s in STAGES.values():
        reads = "<br>".join(
            f"`{t}` ({'all columns' if set(cols) == set(TABLES[t].column_names) else ', '.join(cols)})"
            for t, cols in s.reads.items()
        ) or "the configured inputs (`inputs:`)"
        writes = ", ".join(f"`{t}`" for t in s.writes) or "the release files"
        drops = f"`{s.drops_table}`, `stats_drops`" if s.drops_table else "nothing"
        files = ", ".join(f"{what} (`{key}`)" for what, key in s.files.items()) or "none"
        rows.append((f"`{s.name}`", reads, writes, drops, f"`{s.settings}:`", files))
    lines.append(markdown_table(("stage", "reads (columns used)", "writes", "drops to", "settings", "files"), rows))
    for table in TABLES.values():
        writers = ", ".join(f"`{w}`" for w in writers_of(table.name)) or "`ratio-spark update` (`pipeline/update.py`)"
        readers = [s.name for s in STAGES.values() if table.name in s.reads]
        lines += ["", f"## `{table.name}`", "", f"One row per {table.one_row_per}. Written by {writers}"
                  + (f"; read by {', '.join(f'`{r}`' for r in readers)}" if readers else "")
                  + (f"; partitioned by {', '.join(f'`{p}`' for p in table.partition_by)}" if table.partition_by else "")
                  + ".", "", markdown_table(("column", "type", "meaning"),
                                            [(f"`{c.name}`", f"`{c.type}`", c.meaning) for c in table.columns])]
    lines += [
        "", "## Reasons", "",
        "Every code a stage writes to `rejects` (ingest), `drops` (the other stages) or, for kept rows, as a flag",
        "(`sentences.norm_flag`). `stats_drops` counts them per stage. A new reason is one line in",
        "`ratio_spark/core/schema.py` (`Reason`).", "",
        markdown_table(("reason", "stage", "removes", "meaning"),
                       [(f"`{r.code}`", r.stage, r.item + (" (kept, flagged)" if r.kept else ""), r.meaning)
                        for r in REASONS.values()]),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table_catalogue(), end="")
