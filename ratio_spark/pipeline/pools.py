"""Queries and the shared candidate pool of each split (the paper's §4.2, §4.3 and appendix B.2).

The input is ``mined_pairs`` with a ``split`` column (``splits.assign_splits``). The output is two
tables:

* ``queries``: one row per distinct (split, move, query text, gold text) of ``role = move`` pairs.
* ``candidates``: the split's pool, shared by the three moves. It holds the gold sentences of all
  moves and the distractor sentences of that split's papers, one row per normalised text.

Ids are hashes of content, so a rerun gives the same ids whatever the partitioning or row order:
``query_id = "q" + 16 hex of sha2(split, move, query key, gold key)`` and
``candidate_id = "c" + 16 hex of sha2(split, text key)``. The parts are joined with U+001F, which
the normalisation removes from all text, so two different inputs cannot give the same hash input.
The two prefixes keep query ids and candidate ids in separate namespaces.

The rules, applied in this order (each drop is a row of ``PoolBuild.drops``, with a reason of
``core.schema.Reason``; the pools stage writes them to the ``drops`` table):

1. Unusable rows: a pair with no move/category (``missing_label``), an empty text (``empty_text``),
   or a query that equals its own gold (``query_equals_gold``). Such pairs leave no query and no
   candidate.
2. Cross-split rule: a text belongs to the earliest split (train < validation < test) in which it
   occurs as a query text, a gold text or a distractor text. In a later split:
   a pair whose gold text occurs earlier is dropped whole (``gold_seen_in_earlier_split``). With
   its gold gone, the query has nothing to retrieve.
   A pair whose query text occurs earlier loses its query (``query_seen_in_earlier_split``). Its
   gold stays in the pool, like the gold of a pair that the silver filter rejects.
   A distractor whose text occurs earlier is dropped (``distractor_seen_in_earlier_split``).
   The rule runs before the leakage checks, so those checks see clean splits. Boilerplate
   ("code is available on github") is what it usually removes.
3. Pool de-duplication by normalised text within a split. A text that is both a gold and a
   distractor stays as the gold, and the distractor is dropped (``distractor_is_gold``). Duplicate
   golds (``duplicate_gold``) and duplicate distractors (``duplicate_distractor``) are merged into
   one candidate.
4. Query de-duplication on (split, move, query text, gold text) (``duplicate_query``).
5. Exclusion: when a query's own text is also in the pool (another pair's gold, or a distractor),
   that candidate's id goes into ``exclude_candidate_ids``. The evaluator skips it, so a retriever
   is not rewarded or punished for finding the query itself.

Everything is Spark SQL (no Python UDFs). ``build_pools`` returns lazy DataFrames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ratio_spark.core.schema import REASONS, SPLITS, TABLES, Reason
from ratio_spark.core.text import JAVA_WHITESPACE
from ratio_spark.pipeline.stage import Balance
from ratio_spark.pipeline.splits import split_rank
from ratio_spark.pipeline.tables import drop_rows

ID_SEPARATOR = "\u001f"  # never in normalised text (ratio_spark.core.text.INVALID_CHARS_PATTERN removes it)
ID_HEX_CHARS = 16

QUERY_COLUMNS = TABLES["queries"].column_names
# ``gold_moves``: the moves for which this text is a gold in the split (sorted). This is more than
# ``source``, which names the one source kept when rows merge. It is what an oracle "gold of the move
# only" pool filters on (the paper's appendix F.2).
CANDIDATE_COLUMNS = TABLES["candidates"].column_names


# The control characters that are not whitespace: the key drops them.
OTHER_CONTROLS = "".join(chr(c) for c in [*range(0x20), 0x7F] if chr(c) not in JAVA_WHITESPACE)


def text_key(column: Column) -> Column:
    """The de-duplication key: the text with case and whitespace folded and control characters removed.

    ``mined_pairs`` text is already normalised (appendix B.1), so the key usually equals the text.
    Folding again makes the key safe to rely on here. It is also idempotent.

    The same key as replacing each run of ``core.text.WHITESPACE_PATTERN`` by a space, then removing ``[\\x00-\\x1F\\x7F]``
    and trimming (tests/pipeline/test_pools.py checks it), in a third less time: the whitespace becomes spaces by
    ``translate``, and the one regular expression runs only on a text with two spaces in a row.
    """
    spaced = F.translate(F.lower(column), JAVA_WHITESPACE, " " * len(JAVA_WHITESPACE))
    collapsed = F.when(spaced.contains("  "), F.regexp_replace(spaced, "  +", " ")).otherwise(spaced)
    return F.trim(F.translate(collapsed, OTHER_CONTROLS, ""))


def key_hashes(*keys: Column) -> list[Column]:
    """Two 64-bit hashes of ``keys`` (xxhash64, seeds 0 and 1): group or count by them instead of the texts, and a
    shuffle moves 16 bytes a row. Two different keys share both with a chance of ~1e-21 among a billion."""
    return [F.xxhash64(F.lit(seed), *keys) for seed in (0, 1)]


def _hex_id(prefix: str, *parts: Column) -> Column:
    return F.concat(F.lit(prefix), F.substring(F.sha2(F.concat_ws(ID_SEPARATOR, *parts), 256), 1, ID_HEX_CHARS))


def candidate_id(split: Column, key: Column) -> Column:
    """``c`` + 16 hex: stable across reruns, one id per (split, normalised text)."""
    return _hex_id("c", split, key)


def query_id(split: Column, move: Column, query_key: Column, gold_key: Column) -> Column:
    """``q`` + 16 hex: stable across reruns, one id per (split, move, query text, gold text)."""
    return _hex_id("q", split, move, query_key, gold_key)


@dataclass
class PoolBuild:
    """The built tables plus ``drops``: one row per pair, query or candidate a rule removed or merged
    (``tables.drop_rows``; the reason's ``item`` says which: ``pair`` = the query and its gold,
    ``query`` = the query only, its gold stays a candidate, ``candidate``)."""

    queries: DataFrame
    candidates: DataFrame
    drops: DataFrame
    inputs: DataFrame  # the pairs that came in, with ``split`` and ``role``
    # The intermediate frames that queries, candidates and drops all read (the keyed move and distractor
    # rows, the texts in more than one split, the ranked pool, the query rows), persisted so that writing
    # the three computes them once.
    shared: tuple[DataFrame, ...] = ()

    def unpersist(self) -> None:
        """Free the ``shared`` frames once the outputs are written."""
        for frame in self.shared:
            frame.unpersist()

    def summary(self) -> dict[str, Any]:
        """``summarise_pools`` over counts of these (lazy) frames, its balances checked (``ReconciliationError`` when
        they do not add up); the pools stage counts the written tables instead."""
        summary = summarise_pools(
            {(r["split"], r["role"]): r["count"] for r in self.inputs.groupBy("split", "role").count().collect()},
            *pool_counts(self.queries, self.candidates),
            {(r["reason"], r["split"], r["role"]): r["count"]
             for r in self.drops.groupBy("reason", "split", "role").count().collect()},
        )
        summary["reconciled"] = [balance.check("pools") for balance in summary["balances"]]
        return summary


def pool_counts(queries: DataFrame, candidates: DataFrame) -> tuple[dict[tuple, int], dict[tuple, int]]:
    """(split, move) -> queries and (split, source) -> candidates: what ``stats.stats_split_sizes`` and the pools'
    reconciliation (``summarise_pools``) both count."""
    return (
        {(r["split"], r["move"]): r["count"] for r in queries.groupBy("split", "move").count().collect()},
        {(r["split"], r["source"]): r["count"] for r in candidates.groupBy("split", "source").count().collect()},
    )


def summarise_pools(inputs: dict[tuple, int], queries: dict[tuple, int], candidates: dict[tuple, int],
                    drops: dict[tuple, int]) -> dict[str, Any]:
    """Counts per split with the drops by reason, and the ``Balance`` of each part (the runner checks them).

    ``inputs``: (split, role) -> pairs in (split None: out of range); ``queries``: (split, move) -> rows;
    ``candidates``: (split, source) -> rows; ``drops``: (reason, split, role) -> rows. Per split, two sums:
    move pairs = queries + query drops + move pair drops, and move pairs + distractors = candidates +
    candidate drops + pair drops (a pair's gold enters the pool unless the whole pair is dropped).
    """
    out: dict[str, Any] = {"splits": {}, "balances": []}
    for split in (*SPLITS, None):
        here = {key: n for key, n in drops.items() if key[1] == split}
        by_item = {item: {r: n for (r, _, role), n in here.items() if REASONS[r].item == item}
                   for item in ("pair", "query", "candidate")}
        pair_drops = {role: {r: n for (r, _, ro), n in here.items() if REASONS[r].item == "pair" and ro == role}
                      for role in ("move", "distractor")}
        received = {role: n for (s, role), n in inputs.items() if s == split}
        move_in, distractor_in = received.get("move", 0), received.get("distractor", 0)
        balances = out["balances"]
        if split is None:  # pairs outside every split: all dropped
            balances.append(Balance("pairs", sum(received.values()), {}, by_item["pair"], "no split"))
            continue
        n_queries = sum(n for (s, _), n in queries.items() if s == split)
        n_candidates = sum(n for (s, _), n in candidates.items() if s == split)
        other_in = sum(n for role, n in received.items() if role not in ("move", "distractor"))
        balances.append(Balance("move pairs", move_in, {"queries": n_queries},
                                _merge(by_item["query"], pair_drops["move"]), f"{split}, queries"))
        balances.append(Balance("move pairs and distractors", move_in + distractor_in, {"candidates": n_candidates},
                                _merge(by_item["candidate"], pair_drops["move"], pair_drops["distractor"]), f"{split}, pool"))
        other_drops = {r: n for (r, _, ro), n in here.items() if ro not in ("move", "distractor")}
        if other_in or other_drops:  # rows whose role is neither move nor distractor: all dropped
            balances.append(Balance("pairs of another role", other_in, {}, other_drops, f"{split}, other roles"))
        out["splits"][split] = {
            "pairs_in": {"move": move_in, "distractor": distractor_in, "other": other_in},
            "queries": n_queries,
            "queries_by_move": {m: n for (s, m), n in sorted(queries.items()) if s == split},
            "candidates": n_candidates,
            "candidates_by_source": {src: n for (s, src), n in sorted(candidates.items()) if s == split},
            "dropped": {f"{item}:{r}": n for item, reasons in by_item.items() for r, n in sorted(reasons.items())},
        }
    return out


def _merge(*counts: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in counts:
        for key, n in part.items():
            out[key] = out.get(key, 0) + n
    return out


def _dropped(rows: DataFrame, role: Column | str, reason: str | Column, text: str, detail: Column | None = None) -> DataFrame:
    """``rows`` (with split, pair_id, paper_id) as drops of ``role`` (a column, or a literal role)."""
    role_col = role if isinstance(role, Column) else F.lit(role)
    return drop_rows(rows, reason, "pair_id", split="split", role=role_col, text=text, detail=detail)


def build_pools(split_pairs: DataFrame, apply_cross_split_rule: bool = True,
                splits: Collection[str] | None = None) -> PoolBuild:
    """``mined_pairs`` + ``split`` -> queries, candidates and counted drops (the module docstring's rules).

    ``splits``: build only these (an update rebuilds the splits its papers changed); the cross-split rule
    still reads the texts of every split in ``split_pairs``.

    ``apply_cross_split_rule=False`` exists only to build leaking data on purpose: the leakage tests
    use it to show that ``check_leakage`` stops such a build.
    """
    pairs = split_pairs.withColumn("_rank", split_rank(F.col("split")))
    is_move = (F.col("role") == "move") & F.col("move").isNotNull()
    is_distractor = (F.col("role") == "distractor") & F.col("category").isNotNull()

    # Persisted with their text keys: every rule below reads them, and the keys (regular expressions over
    # every text) are then computed once.
    moves = pairs.filter(is_move).select(
        "split", "_rank", "pair_id", "paper_id", "pub_date", "move", "marker", "marker_entry", "context_text",
        "query_text", "query_text_original", "gold_text", "gold_text_original",
        text_key(F.col("query_text")).alias("qkey"), text_key(F.col("gold_text")).alias("gkey"),
    ).persist()
    distractors = pairs.filter(is_distractor).select(
        "split", "_rank", "pair_id", "paper_id", "pub_date", "category",
        F.col("gold_text").alias("text"), F.col("gold_text_original").alias("text_original"),
        text_key(F.col("gold_text")).alias("key"),
    ).persist()
    shared_frames: list[DataFrame] = [moves, distractors]  # ``PoolBuild.shared``
    drops = [_dropped(pairs.filter(~(is_move | is_distractor)), F.col("role"), Reason.MISSING_LABEL, "gold_text")]

    # 1. Unusable rows.
    empty_move = (F.col("qkey") == "") | (F.col("gkey") == "")
    query = F.concat(F.lit("query: "), F.col("query_text"))
    drops.append(_dropped(moves.filter(empty_move), "move", Reason.EMPTY_TEXT, "gold_text", query))
    same = ~empty_move & (F.col("qkey") == F.col("gkey"))
    drops.append(_dropped(moves.filter(same), "move", Reason.QUERY_EQUALS_GOLD, "gold_text", query))
    moves = moves.filter(~empty_move & (F.col("qkey") != F.col("gkey")))
    drops.append(_dropped(distractors.filter(F.col("key") == ""), "distractor", Reason.EMPTY_TEXT, "text"))
    distractors = distractors.filter(F.col("key") != "")

    every_split = moves, distractors  # what the cross-split rule reads
    if splits is not None:
        moves, distractors = (frame.filter(F.col("split").isin(*splits)) for frame in every_split)

    # 2. Cross-split rule. Only texts that occur in more than one split matter (few: boilerplate), so
    #    the joins below are against a small table.
    if apply_cross_split_rule:
        occurrences = (
            every_split[0].select(F.col("qkey").alias("key"), "_rank")
            .unionByName(every_split[0].select(F.col("gkey").alias("key"), "_rank"))
            .unionByName(every_split[1].select("key", "_rank"))
        )
        # Persisted and broadcast: the three joins below read it, and it is small.
        shared = (
            occurrences.groupBy("key")
            .agg(F.min("_rank").alias("first_rank"), F.max("_rank").alias("last_rank"))
            .filter(F.col("first_rank") < F.col("last_rank"))
            .select("key", "first_rank")
            .persist()
        )
        shared_frames.append(shared)
        shared = F.broadcast(shared)
        moves = moves.join(
            shared.withColumnRenamed("key", "qkey").withColumnRenamed("first_rank", "_q_first"), "qkey", "left"
        ).join(shared.withColumnRenamed("key", "gkey").withColumnRenamed("first_rank", "_g_first"), "gkey", "left")
        gold_leak = F.coalesce(F.col("_g_first") < F.col("_rank"), F.lit(False))
        query_leak = F.coalesce(F.col("_q_first") < F.col("_rank"), F.lit(False))
        drops.append(_dropped(moves.filter(gold_leak), "move", Reason.GOLD_SEEN_IN_EARLIER_SPLIT, "gold_text", query))
        moves = moves.filter(~gold_leak).withColumn("_query_kept", ~query_leak)
        drops.append(_dropped(moves.filter(query_leak), "move", Reason.QUERY_SEEN_IN_EARLIER_SPLIT, "query_text"))
        distractors = distractors.join(shared, "key", "left")
        d_leak = F.coalesce(F.col("first_rank") < F.col("_rank"), F.lit(False))
        drops.append(_dropped(distractors.filter(d_leak), "distractor", Reason.DISTRACTOR_SEEN_IN_EARLIER_SPLIT, "text"))
        distractors = distractors.filter(~d_leak)
    else:
        moves = moves.withColumn("_query_kept", F.lit(True))

    # 3. The pool: golds of every kept pair (also those whose query was dropped) and distractors,
    #    one row per (split, key); a gold wins over a distractor, then the order below decides.
    pool_rows = moves.select(
        "split", F.col("gkey").alias("key"), F.col("gold_text").alias("text"),
        F.col("gold_text_original").alias("text_original"), F.concat(F.lit("gold_"), F.col("move")).alias("source"),
        "move", "paper_id", "pub_date", "pair_id", F.lit(0).alias("_priority"), F.lit("move").alias("role"),
    ).unionByName(
        distractors.select(
            "split", "key", "text", "text_original", F.concat(F.lit("distractor_"), F.col("category")).alias("source"),
            F.lit(None).cast("string").alias("move"), "paper_id", "pub_date", "pair_id",
            F.lit(1).alias("_priority"), F.lit("distractor").alias("role"),
        )
    )
    by_text = Window.partitionBy("split", "key")
    in_order = by_text.orderBy("_priority", "source", "paper_id", "pair_id", "text_original", "text")
    ranked = (
        pool_rows.withColumn("_rn", F.row_number().over(in_order))
        .withColumn("_kept_source", F.first("source").over(in_order))
        .withColumn("_has_gold", F.min("_priority").over(by_text) == 0)
        .withColumn("gold_moves", F.array_sort(F.collect_set("move").over(by_text)))
    ).persist()  # candidates, their drops and the queries' exclusions read it
    shared_frames.append(ranked)
    candidates = ranked.filter(F.col("_rn") == 1).select(
        "split", candidate_id(F.col("split"), F.col("key")).alias("candidate_id"), "text", "text_original", "source",
        "gold_moves", "paper_id", "pub_date",
    )
    merged = ranked.filter(F.col("_rn") > 1)
    merge_reason = (
        F.when((F.col("_priority") == 1) & F.col("_has_gold"), F.lit(Reason.DISTRACTOR_IS_GOLD))
        .when(F.col("_priority") == 0, F.lit(Reason.DUPLICATE_GOLD))
        .otherwise(F.lit(Reason.DUPLICATE_DISTRACTOR))
    )
    merged_into = F.concat(F.lit("merged into "), candidate_id(F.col("split"), F.col("key")), F.lit(" as "),
                           F.col("_kept_source"))
    drops.append(_dropped(merged, F.col("role"), merge_reason, "text", merged_into))

    # 4. Queries, de-duplicated on (split, move, query key, gold key).
    query_rows = moves.filter(F.col("_query_kept")).withColumn(
        "_rn",
        F.row_number().over(Window.partitionBy("split", "move", "qkey", "gkey").orderBy("pair_id", "paper_id")),
    )
    query_rows = query_rows.persist()
    shared_frames.append(query_rows)
    drops.append(_dropped(query_rows.filter(F.col("_rn") > 1), "move", Reason.DUPLICATE_QUERY, "query_text"))
    query_rows = query_rows.filter(F.col("_rn") == 1)

    # 5. Exclusion: the candidate whose text is the query's own text, if the pool holds one.
    pool_ids = candidates.select(F.col("candidate_id").alias("_self_id"))
    queries = (
        query_rows.withColumn("_self_id", candidate_id(F.col("split"), F.col("qkey")))
        .join(pool_ids.withColumn("_in_pool", F.lit(True)), "_self_id", "left")
        .select(
            "split", "move",
            query_id(F.col("split"), F.col("move"), F.col("qkey"), F.col("gkey")).alias("query_id"),
            "query_text", "query_text_original", "context_text",
            candidate_id(F.col("split"), F.col("gkey")).alias("gold_candidate_id"),
            "marker", "marker_entry", "paper_id", "pub_date", "pair_id",
            F.when(F.col("_in_pool"), F.array(F.col("_self_id")))
            .otherwise(F.array().cast("array<string>"))
            .alias("exclude_candidate_ids"),
        )
    )

    all_drops = drops[0]
    for extra in drops[1:]:
        all_drops = all_drops.unionByName(extra)
    if splits is not None:
        all_drops = all_drops.filter(F.col("split").isin(*splits))
    return PoolBuild(queries=queries, candidates=candidates, drops=all_drops, inputs=split_pairs,
                     shared=tuple(shared_frames))
