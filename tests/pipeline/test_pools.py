"""Splits, shared pools, the cross-split rule, leakage checks, stats and the release, on hand-built pairs.

The fixture is a small ``mined_pairs`` table (``core.schema.TABLES``) of eight papers from 2014 to 2018
plus one undated paper. Splits: train up to 2016, validation 2017, test 2018. Each row is there to
exercise one rule; the comment on the row says which.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections import Counter

import pytest
from pyspark.sql import functions as F

from ratio_spark.core.schema import TABLES
from ratio_spark.pipeline.export import export_release
from ratio_spark.pipeline.leakage import LeakageError, check_leakage, find_leaks
from ratio_spark.core.text import WHITESPACE_PATTERN
from ratio_spark.pipeline.pools import CANDIDATE_COLUMNS, QUERY_COLUMNS, build_pools, pool_counts, text_key
from ratio_spark.pipeline.settings import SplitsConfig
from ratio_spark.pipeline.splits import assign_splits
from ratio_spark.pipeline.stats import stats_marker_matches, stats_marker_sources, stats_split_sizes, stats_yield
from ratio_spark.pipeline.tables import write_table

SPLITS = SplitsConfig(
    train={"start": "2015-01-01", "end": "2016-12-31"},
    validation={"start": "2017-01-01", "end": "2017-12-31"},
    test={"start": "2018-01-01", "end": "2018-12-31"},
)
D = dt.date

# Sentences (normalised as mining leaves them: lowercase, marker removed).
DROPOUT = "we apply dropout with a rate of 0.5 to every hidden layer."
BPE = "byte pair encoding splits rare words into frequent subword units."
ATTENTION_GENERAL = "neural attention can recover latent linguistic structure without explicit supervision."
RULE_BASED = "rule-based systems require extensive manual feature engineering."
BOILERPLATE = "code and data are publicly available on github."
REPO_GOLD = "the repository includes scripts to reproduce every table in this paper."
SYNTAX_LAYERS = "intermediate layers of deep language models encode rich syntactic information."
AUGMENT_GOLD = "randomly swapping adjacent words reduces the error rate on noisy test sets by 12%."
TABLE_BELOW = "the results are summarised in the table below for all languages."
GROUNDING = "we ground every generated claim in retrieved passages and verify it with an entailment model."
REWARD_HACKING = "reward hacking is a general failure mode of optimising a misspecified objective."
BIO_GOLD = "on biography generation, the share of unsupported facts falls from 31% to 9%."
RATERS = "human raters preferred the baseline outputs for fluency."

# (pair_id, paper_id, pub_date, role, label, marker, marker_entry, marker_source, query_text, gold_text)
ROWS = [
    # --- train (P15-1001 2015, P16-1002 2016)
    ("t1", "P15-1001", D(2015, 6, 1), "move", "address", "to address this issue", "to address", "extension",
     "our model is prone to overfitting on the small training set.", DROPOUT),
    ("t2", "P15-1001", D(2015, 6, 1), "move", "specify", "for example", "for example", "manual",
     "neural machine translation struggles with rare and unknown words.", BPE),
    ("t3", "P15-1001", D(2015, 6, 1), "move", "broaden", "more generally", "more generally", "manual",
     "the attention weights of our parser align with syntactic heads.", ATTENTION_GENERAL),
    # the same (query, gold) as t2 in another paper: one query, one candidate
    ("t4", "P16-1002", D(2016, 3, 15), "move", "specify", "for example", "for example", "manual",
     "neural machine translation struggles with rare and unknown words.", BPE),
    # its query is t2's gold: excluded from its own ranking
    ("t5", "P16-1002", D(2016, 3, 15), "move", "specify", "for instance", "for instance", "manual",
     BPE, "the word unhappiness is segmented into un, happi and ness."),
    # a distractor whose text is t1's gold: the gold wins, the distractor is dropped and counted
    ("t6", "P16-1002", D(2016, 3, 15), "distractor", "similarity", "similarly", "similarly", "manual",
     "regularisation is essential for deep networks.", DROPOUT),
    ("t7", "P16-1002", D(2016, 3, 15), "distractor", "contrast", "in contrast", "in contrast", "manual",
     "neural models learn features from data.", RULE_BASED),
    ("t8", "P16-1002", D(2016, 3, 15), "distractor", "continuation", "in addition", "in addition", "manual",
     "we evaluate on five benchmarks.", BOILERPLATE),
    # its query is the distractor t7: excluded from its own ranking
    ("t9", "P16-1002", D(2016, 3, 15), "move", "address", "to overcome this limitation", "to overcome", "extension",
     RULE_BASED, "we learn features directly from raw character sequences."),
    # --- validation (P17-1003, P17-1004 2017)
    ("v1", "P17-1003", D(2017, 7, 1), "move", "address", "to mitigate this cost", "to mitigate", "extension",
     "annotating discourse relations is expensive and slow.",
     "we crowdsource labels and aggregate them with a probabilistic model."),
    # query text seen in train (t8): the query goes, its gold stays in the validation pool
    ("v2", "P17-1003", D(2017, 7, 1), "move", "specify", "for example", "for example", "manual", BOILERPLATE, REPO_GOLD),
    # gold text seen in train (t3): the whole pair goes
    ("v3", "P17-1004", D(2017, 9, 10), "move", "broaden", "more generally", "more generally", "manual",
     "syntactic heads emerge in the attention maps of our model.", ATTENTION_GENERAL),
    # distractor text seen in train (t7): dropped
    ("v4", "P17-1004", D(2017, 9, 10), "distractor", "inference", "therefore", "therefore", "manual",
     "hand-crafted features transfer poorly.", RULE_BASED),
    ("v5", "P17-1004", D(2017, 9, 10), "move", "specify", "for example", "for example", "manual",
     "data augmentation improves robustness to input noise.", AUGMENT_GOLD),
    ("v6", "P17-1003", D(2017, 7, 1), "move", "broaden", "more broadly", "more broadly", "llm",
     "our probing classifier recovers part-of-speech tags from layer four.", SYNTAX_LAYERS),
    ("v7", "P17-1004", D(2017, 9, 10), "distractor", "other", "in general", "in general", "manual",
     "we test eleven languages.", TABLE_BELOW),
    # --- test (P18-1005, P18-1006 2018)
    ("e1", "P18-1005", D(2018, 2, 1), "move", "address", "to address this problem", "to address", "extension",
     "large language models often hallucinate facts that are not in the source.", GROUNDING),
    ("e2", "P18-1005", D(2018, 2, 1), "move", "broaden", "more generally", "more generally", "manual",
     "the agent learns to exploit a bug in the reward function of the game.", REWARD_HACKING),
    # gold text seen in validation (v6): the whole pair goes
    ("e3", "P18-1006", D(2018, 5, 1), "move", "specify", "for instance", "for instance", "manual",
     "probing shows where syntax lives in a network.", SYNTAX_LAYERS),
    ("e4", "P18-1006", D(2018, 5, 1), "move", "specify", "for example", "for example", "manual",
     "retrieval augmented generation reduces unsupported claims.", BIO_GOLD),
    ("e5", "P18-1006", D(2018, 5, 1), "distractor", "contrast", "on the other hand", "on the other hand", "manual",
     "automatic metrics favour the retrieval model.", RATERS),
    # distractor text seen in validation (v7): dropped
    ("e6", "P18-1006", D(2018, 5, 1), "distractor", "other", "in general", "in general", "manual",
     "we test twelve languages.", TABLE_BELOW),
    # a repeated sentence: query equals gold, nothing to retrieve
    ("e7", "P18-1006", D(2018, 5, 1), "move", "address", "to this end", "to this end", "manual",
     "we release our code under an open license.", "we release our code under an open license."),
    # --- outside every split
    ("z1", "P14-1007", D(2014, 11, 1), "move", "specify", "for example", "for example", "manual",
     "word embeddings capture semantic similarity between words.", "the vectors of king and queen lie close together."),
    ("z2", "P14-1007", D(2014, 11, 1), "distractor", "contrast", "in contrast", "in contrast", "manual",
     "prediction-based models scale well.", "count-based models scale poorly to large vocabularies."),
    ("n1", "undated-1", None, "move", "address", "to this end", "to this end", "manual",
     "training deep networks requires large labelled datasets.",
     "we pretrain on unlabelled text and fine-tune on a few hundred examples."),
]

EXPECTED_POOLS = {
    "train": {
        DROPOUT: "gold_address", BPE: "gold_specify", ATTENTION_GENERAL: "gold_broaden",
        "the word unhappiness is segmented into un, happi and ness.": "gold_specify",
        RULE_BASED: "distractor_contrast", BOILERPLATE: "distractor_continuation",
        "we learn features directly from raw character sequences.": "gold_address",
    },
    "validation": {
        "we crowdsource labels and aggregate them with a probabilistic model.": "gold_address",
        REPO_GOLD: "gold_specify", AUGMENT_GOLD: "gold_specify", SYNTAX_LAYERS: "gold_broaden",
        TABLE_BELOW: "distractor_other",
    },
    "test": {GROUNDING: "gold_address", REWARD_HACKING: "gold_broaden", BIO_GOLD: "gold_specify", RATERS: "distractor_contrast"},
}
EXPECTED_QUERY_PAIRS = {"train": {"t1", "t2", "t3", "t5", "t9"}, "validation": {"v1", "v5", "v6"}, "test": {"e1", "e2", "e4"}}


def _row(r):
    pair_id, paper_id, pub_date, role, label, marker, entry, source, query, gold = r
    return {
        "pair_id": pair_id, "paper_id": paper_id, "pub_date": pub_date, "role": role,
        "move": label if role == "move" else None, "category": label if role == "distractor" else None,
        "marker": marker, "marker_entry": entry, "marker_source": source, "lexicon_version": "test-v1",
        "query_sentence_id": f"{pair_id}-q", "gold_sentence_id": f"{pair_id}-g",
        "context_text": "previous sentence of " + pair_id + ".",
        "query_text": query, "query_text_original": query[0].upper() + query[1:],
        "gold_text": gold, "gold_text_original": marker.capitalize() + ", " + gold,
    }


def mined_pairs_df(spark, rows=ROWS):
    return spark.createDataFrame([_row(r) for r in rows], TABLES["mined_pairs"].ddl)


def cid(split, text):
    return "c" + hashlib.sha256(f"{split}\x1f{text}".encode()).hexdigest()[:16]


def computed(frame):
    """The frame computed once and read back as a plain scan (``localCheckpoint``). Not ``cache()``: a cached
    frame keeps its lineage inside every plan over it, and adaptive execution prints the whole plan at each
    re-planned stage (nested caches, each with its initial and final plan: 11 MB per update for the nine
    leakage checks), which made each leakage test take 20-110 s on a dozen rows."""
    return frame.localCheckpoint()


@pytest.fixture(scope="module")
def mined(spark):
    return computed(mined_pairs_df(spark))


@pytest.fixture(scope="module")
def built(mined):
    assignment = assign_splits(mined, SPLITS)
    build = build_pools(assignment.pairs)
    queries, candidates = computed(build.queries), computed(build.candidates)
    return assignment, build, queries, candidates


def by_split(df, column):
    out = {}
    for r in df.collect():
        out.setdefault(r["split"], {})[r[column]] = r
    return out


# --- splits -------------------------------------------------------------------------------------


def test_split_assignment_and_out_of_range_counts(built):
    assignment, *_ = built
    splits = {r["pair_id"]: r["split"] for r in assignment.pairs.select("pair_id", "split").collect()}
    assert {p for p, s in splits.items() if s == "train"} == {f"t{i}" for i in range(1, 10)}
    assert {p for p, s in splits.items() if s == "validation"} == {f"v{i}" for i in range(1, 8)}
    assert {p for p, s in splits.items() if s == "test"} == {f"e{i}" for i in range(1, 8)}
    out = {r["pair_id"]: r["reason"] for r in assignment.out_of_range.collect()}
    assert out == {"z1": "pub_date_outside_splits", "z2": "pub_date_outside_splits", "n1": "missing_pub_date"}
    summary = assignment.summary()
    assert summary["pairs_assigned"] + summary["pairs_out_of_range"] == len(ROWS)
    assert summary["pairs_out_of_range"] == 3 and summary["papers_out_of_range"] == 2
    assert summary["pairs_by_split"]["validation"] == {"pairs": 7, "papers": 2}
    assert summary["out_of_range_by_reason"]["missing_pub_date"] == {"pairs": 1, "papers": 1}


def test_split_range_ends_are_inclusive(spark):
    edge = [r[:2] + (d,) + r[3:] for r, d in zip(ROWS[:3], (D(2016, 12, 31), D(2017, 1, 1), D(2018, 12, 31)))]
    got = {r["pair_id"]: r["split"] for r in assign_splits(mined_pairs_df(spark, edge), SPLITS).pairs.collect()}
    assert got == {"t1": "train", "t2": "validation", "t3": "test"}


# --- pools --------------------------------------------------------------------------------------


def test_text_key_equals_the_regular_expressions_it_replaces_for_every_character(spark):
    """Every character of the Basic Multilingual Plane, alone, doubled, between words and at the ends: the key is
    the one the two regular expressions give (each whitespace run one space, control characters removed)."""
    characters = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"{c}Ab {c}{c}x  {c} y{c}\t{c}" for c in characters]
    texts += ["", " ", "  a  ", "a\x01 \x01b", "a \x01 b", "\u3000\tA\u00a0\u00a0b\x7f \n", "No  Change"]
    frame = spark.createDataFrame([(t,) for t in texts], "text string")
    folded = F.regexp_replace(F.lower(F.col("text")), WHITESPACE_PATTERN, " ")
    expected = F.trim(F.regexp_replace(folded, r"[\x00-\x1F\x7F]", ""))
    rows = frame.select("text", text_key(F.col("text")).alias("key"), expected.alias("expected")).collect()
    assert len(rows) == len(texts)
    different = [(r["text"], r["key"], r["expected"]) for r in rows if r["key"] != r["expected"]]
    assert not different, different[:5]
    keys = {r["text"]: r["key"] for r in rows}
    assert keys["\u3000\tA\u00a0\u00a0b\x7f \n"] == "a b" and keys["a\x01 \x01b"] == "a b"


def test_pool_holds_golds_of_all_moves_and_own_distractors_only(built):
    _, _, _, candidates = built
    assert tuple(candidates.columns) == CANDIDATE_COLUMNS
    pools = {}
    for r in candidates.collect():
        pools.setdefault(r["split"], {})[r["text"]] = r["source"]
    assert pools == EXPECTED_POOLS
    # out-of-range papers contribute nothing anywhere
    assert candidates.filter(F.col("paper_id").isin("P14-1007", "undated-1")).count() == 0
    # every candidate comes from a paper of its own split
    papers = {r["paper_id"]: r["split"] for r in candidates.select("paper_id", "split").distinct().collect()}
    assert papers == {"P15-1001": "train", "P16-1002": "train", "P17-1003": "validation", "P17-1004": "validation",
                      "P18-1005": "test", "P18-1006": "test"}


def test_queries_one_per_distinct_pair_with_gold_in_pool(built):
    _, _, queries, candidates = built
    assert tuple(queries.columns) == QUERY_COLUMNS
    got = {}
    for r in queries.collect():
        got.setdefault(r["split"], set()).add(r["pair_id"])
    assert got == EXPECTED_QUERY_PAIRS  # t4 duplicates t2; v2, v3, e3, e7 dropped (see below)
    gold = {r["pair_id"]: r["gold_candidate_id"] for r in queries.collect()}
    assert gold["t1"] == cid("train", DROPOUT) and gold["e4"] == cid("test", BIO_GOLD)
    pool_ids = {(r["split"], r["candidate_id"]) for r in candidates.collect()}
    assert all((r["split"], r["gold_candidate_id"]) in pool_ids for r in queries.collect())


def test_ids_are_content_hashes_in_separate_namespaces(built):
    _, _, queries, candidates = built
    q_ids = [r["query_id"] for r in queries.collect()]
    c_ids = [r["candidate_id"] for r in candidates.collect()]
    assert all(re.fullmatch(r"q[0-9a-f]{16}", i) for i in q_ids)
    assert all(re.fullmatch(r"c[0-9a-f]{16}", i) for i in c_ids)
    assert len(set(q_ids)) == len(q_ids) and len(set(c_ids)) == len(c_ids)
    assert cid("validation", REPO_GOLD) in c_ids
    t1 = queries.filter(F.col("pair_id") == "t1").first()
    expected = "q" + hashlib.sha256(
        "\x1f".join(["train", "address", "our model is prone to overfitting on the small training set.", DROPOUT]).encode()
    ).hexdigest()[:16]
    assert t1["query_id"] == expected


def test_ids_and_rows_are_identical_across_runs(spark, built):
    _, build, queries, candidates = built
    # Second run: rows reversed and spread over more partitions.
    again = build_pools(assign_splits(mined_pairs_df(spark, ROWS[::-1]).repartition(5), SPLITS).pairs)
    again.queries.cache()
    again.candidates.cache()

    def rows(df, key):
        return sorted((r.asDict() for r in df.collect()), key=lambda d: d[key])

    assert rows(again.queries, "query_id") == rows(queries, "query_id")
    assert rows(again.candidates, "candidate_id") == rows(candidates, "candidate_id")
    assert sorted(map(tuple, again.drops.collect())) == sorted(map(tuple, build.drops.collect()))


def test_query_text_in_pool_is_excluded(built):
    _, _, queries, _ = built
    excl = {r["pair_id"]: r["exclude_candidate_ids"] for r in queries.collect()}
    assert excl["t5"] == [cid("train", BPE)]  # the query is another pair's gold
    assert excl["t9"] == [cid("train", RULE_BASED)]  # the query is a distractor
    assert all(v == [] for k, v in excl.items() if k not in ("t5", "t9"))


def test_gold_wins_over_distractor_and_drops_are_counted(built):
    _, build, _, candidates = built
    dropout = candidates.filter(F.col("text") == DROPOUT).collect()
    assert len(dropout) == 1 and dropout[0]["source"] == "gold_address" and dropout[0]["gold_moves"] == ["address"]
    summary = build.summary()  # raises ReconciliationError when in != out + dropped
    assert summary["splits"]["train"]["dropped"] == {
        "candidate:distractor_is_gold": 1, "candidate:duplicate_gold": 1, "query:duplicate_query": 1,
    }
    assert summary["splits"]["train"]["queries"] == 5 and summary["splits"]["train"]["candidates"] == 7


def test_cross_split_rule_keeps_later_splits_clean(built):
    _, build, queries, candidates = built
    summary = build.summary()
    assert summary["splits"]["validation"]["dropped"] == {
        "pair:gold_seen_in_earlier_split": 1,  # v3: its gold is a train gold
        "query:query_seen_in_earlier_split": 1,  # v2: its query is a train distractor
        "candidate:distractor_seen_in_earlier_split": 1,  # v4: a train distractor again
    }
    assert summary["splits"]["test"]["dropped"] == {
        "pair:gold_seen_in_earlier_split": 1,  # e3: its gold is a validation gold
        "candidate:distractor_seen_in_earlier_split": 1,  # e6: a validation distractor again
        "pair:query_equals_gold": 1,  # e7
    }
    # v2 lost its query but its gold stays in the validation pool; the boilerplate stays in train only.
    assert candidates.filter((F.col("split") == "validation") & (F.col("text") == REPO_GOLD)).count() == 1
    texts = queries.select("split", F.col("query_text").alias("t")).unionByName(candidates.select("split", F.col("text").alias("t")))
    assert texts.groupBy("t").agg(F.countDistinct("split").alias("n")).filter("n > 1").count() == 0
    # The rule applies to texts, not papers: P17-1003 keeps its other pairs.
    assert {r["pair_id"] for r in queries.filter(F.col("paper_id") == "P17-1003").collect()} == {"v1", "v6"}


# --- leakage ------------------------------------------------------------------------------------


def test_leakage_checks_pass_on_clean_pools(built):
    _, _, queries, candidates = built
    assert len(check_leakage(queries, candidates, SPLITS)["leakage_checks_passed"]) == 9


def test_leakage_text_in_two_splits(mined):
    leaky = build_pools(assign_splits(mined, SPLITS).pairs, apply_cross_split_rule=False)
    with pytest.raises(LeakageError) as err:
        check_leakage(computed(leaky.queries), computed(leaky.candidates), SPLITS)
    failure = {f.check: f for f in err.value.failures}["text_in_two_splits"]
    # boilerplate, attention, rule-based (train+validation); syntax layers, "table below" (validation+test)
    assert failure.count == 5
    assert failure.splits == ["train", "validation", "test"]  # in time order
    message = str(err.value)
    assert "text_in_two_splits" in message and "'code and data are publicly available on github.' in train+validation" in message
    assert "in validation+test as candidate" in message


def test_leakage_paper_in_two_splits(spark):
    # One paper whose rows disagree on its date lands in two splits.
    rows = ROWS + [("t10", "P16-1002", D(2017, 2, 1), "move", "specify", "for example", "for example", "manual",
                    "convolutional filters detect local n-gram patterns.", "a width-three filter fires on negated phrases.")]
    build = build_pools(assign_splits(mined_pairs_df(spark, rows), SPLITS).pairs)
    with pytest.raises(LeakageError) as err:
        check_leakage(computed(build.queries), computed(build.candidates), SPLITS)
    failure = {f.check: f for f in err.value.failures}["paper_in_two_splits"]
    assert failure.count == 1 and failure.splits == ["train", "validation"]
    assert "paper P16-1002 in train+validation" in failure.examples


def test_leakage_paper_dated_outside_its_split(mined):
    # Pools built under other dates (validation runs into March 2018) than the ones checked.
    other = SplitsConfig(
        train={"start": "2015-01-01", "end": "2016-12-31"},
        validation={"start": "2017-01-01", "end": "2018-03-31"},
        test={"start": "2018-04-01", "end": "2018-12-31"},
    )
    build = build_pools(assign_splits(mined, other).pairs)
    with pytest.raises(LeakageError) as err:
        check_leakage(computed(build.queries), computed(build.candidates), SPLITS)
    failure = {f.check: f for f in err.value.failures}["paper_date_outside_split"]
    assert failure.splits == ["validation"] and failure.count == 1
    assert failure.examples == ["paper P18-1005 dated 2018-02-01 in validation"]


def test_leakage_distractor_that_is_a_gold(built):
    _, _, queries, candidates = built
    dup = candidates.filter(F.col("text") == DROPOUT).withColumn("source", F.lit("distractor_similarity"))
    with pytest.raises(LeakageError) as err:
        check_leakage(queries, candidates.unionByName(dup), SPLITS)
    assert {"distractor_is_gold", "duplicate_pool_text"} <= set(err.value.checks)
    assert "train" in {s for f in err.value.failures for s in f.splits}
    # A query whose gold candidate is labelled as a distractor.
    relabelled = candidates.withColumn(
        "source", F.when(F.col("text") == DROPOUT, F.lit("distractor_similarity")).otherwise(F.col("source"))
    )
    with pytest.raises(LeakageError) as err:
        check_leakage(queries, relabelled, SPLITS)
    assert err.value.checks == ["gold_is_distractor"]
    assert err.value.failures[0].count == 1 and err.value.failures[0].splits == ["train"]


def test_leakage_gold_missing_from_pool(built):
    _, _, queries, candidates = built
    without = candidates.filter(F.col("text") != GROUNDING)
    with pytest.raises(LeakageError) as err:
        check_leakage(queries, without, SPLITS)
    assert err.value.checks == ["gold_missing"]
    failure = err.value.failures[0]
    assert failure.splits == ["test"] and failure.count == 1
    assert cid("test", GROUNDING) in failure.examples[0]


def test_leakage_gold_excluded_and_bad_ids(built):
    _, _, queries, candidates = built
    broken = queries.withColumn(
        "exclude_candidate_ids",
        F.when(F.col("pair_id") == "t1", F.array("gold_candidate_id")).otherwise(F.col("exclude_candidate_ids")),
    ).withColumn("query_id", F.when(F.col("pair_id") == "t2", F.lit("c0123456789abcdef")).otherwise(F.col("query_id")))
    checks = {f.check for f in find_leaks(broken, candidates, SPLITS)}
    assert checks == {"gold_excluded", "duplicate_id"}


# --- stats --------------------------------------------------------------------------------------


def test_stats_split_sizes_table5_shape(spark, built):
    _, _, queries, candidates = built
    table = stats_split_sizes(spark, *pool_counts(queries, candidates)).collect()
    rows = {(r["split"], r["group"], r["label"]): (r["queries"], r["sentences"]) for r in table}
    assert len(rows) == 3 * (3 + 5 + 1)  # every move and distractor category, zeros included, plus totals
    assert rows[("train", "move", "address")] == (2, 2)
    assert rows[("train", "move", "specify")] == (2, 2)
    assert rows[("train", "move", "broaden")] == (1, 1)
    assert rows[("train", "distractor", "similarity")] == (0, 0)  # merged into the gold
    assert rows[("train", "distractor", "contrast")] == (0, 1)
    assert rows[("train", "total", "total")] == (5, 7)
    assert rows[("validation", "move", "specify")] == (1, 2)  # v2's gold stays without its query
    assert rows[("validation", "total", "total")] == (3, 5)
    assert rows[("test", "total", "total")] == (3, 4)
    # In Table 5's order: splits in time order, then moves, distractor categories, the total.
    order = {"train": 0, "validation": 1, "test": 2}
    groups = {"move": 0, "distractor": 1, "total": 2}
    assert [(r["split"], r["group"], r["label"]) for r in table] == sorted(
        rows, key=lambda k: (order[k[0]], groups[k[1]], k[2]))


def test_stats_marker_matches_and_sources(mined):
    expected_pairs = Counter((r[3], r[4], r[7], r[6]) for r in ROWS)
    expected_papers = {k: len({r[1] for r in ROWS if (r[3], r[4], r[7], r[6]) == k}) for k in expected_pairs}
    got = {(r["role"], r["label"], r["marker_source"], r["marker_entry"]): r for r in stats_marker_matches(mined).collect()}
    assert {k: r["pairs"] for k, r in got.items()} == dict(expected_pairs)
    assert {k: r["papers"] for k, r in got.items()} == expected_papers
    # "to address" matched two extensions ("... this issue", "... this problem"): one marker entry, two variants
    assert got[("move", "address", "extension", "to address")]["marker_variants"] == 2
    sources = {(r["role"], r["label"], r["marker_source"]): r for r in stats_marker_sources(mined).collect()}
    assert sources[("move", "address", "extension")]["markers_matched"] == 3  # to address, to overcome, to mitigate
    assert sources[("move", "address", "manual")]["markers_matched"] == 1  # to this end
    assert sources[("move", "address", "all")]["markers_matched"] == 4
    assert sources[("move", "broaden", "llm")]["markers_matched"] == 1
    assert sources[("move", "specify", "all")]["pairs"] == sum(1 for r in ROWS if r[4] == "specify")


def test_stats_yield(spark, mined):
    got = {(r["role"], r["label"]): r for r in stats_yield(mined, 1000).collect()}
    specify = got[("move", "specify")]
    assert specify["pairs_mined"] == 8 and specify["pairs"] == 7  # t4 repeats t2
    assert specify["pairs_per_1000"] == pytest.approx(7.0)
    assert got[("move", "all")]["pairs"] == 17 and got[("move", "all")]["pairs_mined"] == 18
    assert got[("distractor", "contrast")]["pairs_per_1000"] == pytest.approx(3.0)
    # One row per (role, label) of the pairs, and one "all" row, for the moves only.
    labels = {(r["role"], r["move"] or r["category"]) for r in mined.collect()}
    assert set(got) == labels | {("move", "all")}
    # The paper's rate: 76 distinct Specify pairs out of 10,000 consecutive pairs -> 7.6 per 1,000.
    many = spark.range(76).select(
        F.lit("move").alias("role"), F.lit("specify").alias("move"), F.lit(None).cast("string").alias("category"),
        F.concat(F.lit("query "), F.col("id").cast("string")).alias("query_text"), F.lit("gold").alias("gold_text"),
    )
    assert stats_yield(many, 10_000).first()["pairs_per_1000"] == pytest.approx(7.6)
    with pytest.raises(ValueError):
        stats_yield(mined, 0)
    with pytest.raises(TypeError):
        stats_yield(mined, 1000.0)


# --- tables and release -------------------------------------------------------------------------


def test_tables_round_trip_through_delta(spark, built, tmp_path):
    _, _, queries, candidates = built
    for name, df in (("queries", queries), ("candidates", candidates)):
        write_table(df, str(tmp_path / name), partition_by=["split"])
        back = spark.read.format("delta").load(str(tmp_path / name))
        assert back.count() == df.count()
    back = spark.read.format("delta").load(str(tmp_path / "queries"))
    assert dict(back.dtypes)["exclude_candidate_ids"] == "array<string>"
    assert back.filter(F.size("exclude_candidate_ids") > 0).count() == 2


def test_release_loads_with_beir(spark, built, tmp_path):
    from beir.datasets.data_loader import GenericDataLoader

    _, _, queries, candidates = built
    root = tmp_path / "release"
    manifest = export_release(queries, candidates, str(root))
    assert manifest["beir_skipped"] == []
    pools = by_split(candidates, "candidate_id")
    for split in ("train", "validation", "test"):
        for move in ("address", "broaden", "specify"):
            corpus, beir_queries, qrels = GenericDataLoader(str(root / "beir" / move / split)).load(split=split)
            assert set(corpus) == set(pools[split])  # the whole shared pool, for every move
            assert all(doc == {"title": "", "text": pools[split][i]["text"]} for i, doc in corpus.items())
            expected = {r["query_id"]: r for r in queries.filter((F.col("split") == split) & (F.col("move") == move)).collect()}
            assert beir_queries == {q: r["query_text"] for q, r in expected.items()}
            assert qrels == {q: {r["gold_candidate_id"]: 1} for q, r in expected.items()}
        lines = (root / "jsonl" / split / "candidates.jsonl").read_text().splitlines()
        assert len(lines) == len(pools[split])
        record = json.loads(lines[0])
        assert set(record) == set(CANDIDATE_COLUMNS) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", record["pub_date"])
        parquet = spark.read.parquet(str(root / "parquet" / split / "queries"))
        assert sorted(parquet.columns) == sorted(QUERY_COLUMNS)
        assert parquet.count() == len(EXPECTED_QUERY_PAIRS[split])
    excluded = (root / "beir" / "specify" / "train" / "excluded.tsv").read_text().splitlines()
    assert excluded[0] == "query-id\tcorpus-id" and excluded[1].endswith("\t" + cid("train", BPE))
    assert manifest["splits"]["train"] == {"queries": 5, "candidates": 7,
                                          "queries_by_move": {"address": 2, "broaden": 1, "specify": 2}}


def test_release_rerun_is_identical_and_skips_empty_moves(built, tmp_path):
    _, _, queries, candidates = built
    root = tmp_path / "release"
    export_release(queries, candidates, str(root))
    first = {p.relative_to(root): p.read_bytes() for p in (root / "beir").rglob("*") if p.is_file()}
    # Rerun without test Broaden queries: its stale folder must go, everything else stays byte-identical.
    no_broaden = queries.filter(~((F.col("split") == "test") & (F.col("move") == "broaden")))
    manifest = export_release(no_broaden, candidates, str(root))
    assert manifest["beir_skipped"] == ["broaden/test"]
    assert not (root / "beir" / "broaden" / "test").exists()
    second = {p.relative_to(root): p.read_bytes() for p in (root / "beir").rglob("*") if p.is_file()}
    assert {k: v for k, v in first.items() if not str(k).startswith("beir/broaden/test")} == second
    with pytest.raises(ValueError, match="release.root"):
        export_release(queries, candidates, "s3://bucket/release")
