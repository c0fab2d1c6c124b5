"""The release's JSONL and BEIR files, written by the executors in parts and concatenated: on a release that spans
several Spark partitions, every file holds each row once, in the sort order, as ``json.dumps`` writes it; a missing
or short part fails the export instead of shipping a file without its rows."""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest

from ratio_spark.core.config import ConfigError
from ratio_spark.core.errors import ReconciliationError
from ratio_spark.core.schema import TABLES
from ratio_spark.pipeline import export

SPLITS = ("train", "validation", "test")
TEXTS = ["plain text", "naïve “quoted” café — 数据", 'slash / and "quote" and back\\slash', "tab\tand\nnewline", "emoji 🚀"]


def _frames(spark, n_candidates: int = 1500, n_queries: int = 600):
    """Rows in a shuffled order with non-ASCII, '/', escapes, nulls and empty arrays; every split and move."""
    rng = random.Random(7)
    candidates = [{"split": SPLITS[i % 3], "candidate_id": f"c{rng.getrandbits(64):016x}",
                   "text": f"{TEXTS[i % 5]} {i}", "text_original": None if i % 7 == 0 else f"orig {i}",
                   "source": "gold_specify", "gold_moves": [] if i % 2 else ["specify", "address"],
                   "paper_id": f"p{i}", "pub_date": dt.date(2014 + i % 5, 1 + i % 12, 1 + i % 28)}
                  for i in range(n_candidates)]
    pools = {s: [c["candidate_id"] for c in candidates if c["split"] == s] for s in SPLITS}
    queries = []
    for i in range(n_queries):
        split = SPLITS[i % 3]
        queries.append({"split": split, "move": ("address", "broaden", "specify")[i // 3 % 3],
                        "query_id": f"q{rng.getrandbits(64):016x}", "query_text": f"{TEXTS[i % 5]} query {i}",
                        "query_text_original": f"Q {i}", "context_text": None, "gold_candidate_id": rng.choice(pools[split]),
                        "marker": "for example", "marker_entry": "for example", "paper_id": f"p{i}",
                        "pub_date": dt.date(2016, 5, 1 + i % 28), "pair_id": f"m{i}",
                        "exclude_candidate_ids": rng.sample(pools[split], i % 3)})
    rng.shuffle(candidates)
    rng.shuffle(queries)
    q, c = (spark.createDataFrame([[r[name] for name in TABLES[table].column_names] for r in rows], TABLES[table].ddl)
            for table, rows in (("queries", queries), ("candidates", candidates)))
    return queries, candidates, q.repartition(5), c.repartition(5)


def _json(record: dict) -> str:
    """A line as the release has always written it: Python's json.dumps, non-ASCII kept, dates in ISO form."""
    return json.dumps({k: v.isoformat() if isinstance(v, dt.date) else v for k, v in record.items()},
                      ensure_ascii=False) + "\n"


def test_files_hold_every_row_once_in_order_across_partitions(spark, tmp_path, monkeypatch):
    queries, candidates, q, c = _frames(spark)
    assembled = []
    real = export._assemble
    monkeypatch.setattr(export, "_assemble", lambda parts, target, header="": (assembled.append((target, len(parts))),
                                                                               real(parts, target, header))[1])
    previous = spark.conf.get("spark.sql.adaptive.coalescePartitions.enabled")
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")  # keep every shuffle partition
    try:
        manifest = export.export_release(q, c, tmp_path / "release")
    finally:
        spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", previous)
    root = tmp_path / "release"
    parts = {t.relative_to(root).as_posix(): n for t, n in assembled}
    assert parts["jsonl/train/candidates.jsonl"] > 1 and parts["jsonl/train/queries.jsonl"] > 1  # several tasks' parts

    for split in SPLITS:
        pool = sorted((r for r in candidates if r["split"] == split), key=lambda r: r["candidate_id"])
        assert (root / "jsonl" / split / "candidates.jsonl").read_text(encoding="utf-8") == "".join(map(_json, pool))
        mine = sorted((r for r in queries if r["split"] == split), key=lambda r: (r["move"], r["query_id"]))
        assert (root / "jsonl" / split / "queries.jsonl").read_text(encoding="utf-8") == "".join(map(_json, mine))
        corpus = "".join(_json({"_id": r["candidate_id"], "title": "", "text": r["text"]}) for r in pool)
        for move in ("address", "broaden", "specify"):
            folder = root / "beir" / move / split
            rows = [r for r in mine if r["move"] == move]
            assert (folder / "corpus.jsonl").read_text(encoding="utf-8") == corpus
            assert (folder / "queries.jsonl").read_text(encoding="utf-8") == "".join(
                _json({"_id": r["query_id"], "text": r["query_text"], "gold_candidate_id": r["gold_candidate_id"],
                       "exclude_candidate_ids": r["exclude_candidate_ids"]}) for r in rows)
            assert (folder / "qrels" / f"{split}.tsv").read_text() == "query-id\tcorpus-id\tscore\n" + "".join(
                f"{r['query_id']}\t{r['gold_candidate_id']}\t1\n" for r in rows)
            assert (folder / "excluded.tsv").read_text() == "query-id\tcorpus-id\n" + "".join(
                f"{r['query_id']}\t{x}\n" for r in rows for x in r["exclude_candidate_ids"])
            assert manifest["beir"][move][split] == {"queries": len(rows), "corpus": len(pool)}
        assert manifest["splits"][split]["queries"] == len(mine)
        assert manifest["splits"][split]["candidates"] == len(pool)
    assert not (root / export.PARTS).exists()


def test_a_split_without_rows_gets_empty_files_and_no_beir_folder(spark, tmp_path):
    """A small corpus can leave a split empty (no paper after the cut-off): its files exist and are empty."""
    queries, candidates, q, c = _frames(spark, n_candidates=60, n_queries=30)
    manifest = export.export_release(q.filter("split != 'test'"), c.filter("split != 'test'"), tmp_path / "release")
    root = tmp_path / "release"
    assert (root / "jsonl" / "test" / "queries.jsonl").read_text() == ""
    assert (root / "jsonl" / "test" / "candidates.jsonl").read_text() == ""
    assert manifest["splits"]["test"] == {"queries": 0, "candidates": 0, "queries_by_move": {}}
    assert sorted(manifest["beir_skipped"]) == ["address/test", "broaden/test", "specify/test"]
    assert manifest["splits"]["train"]["queries"] == sum(r["split"] == "train" for r in queries)
    assert not (root / "beir" / "address" / "test").exists() and not (root / export.PARTS).exists()


def test_a_missing_or_short_part_fails_the_export(tmp_path):
    part = tmp_path / "part-00000"
    part.write_text("a\nb\n")
    target = tmp_path / "out" / "file.jsonl"
    assert export._assemble([(str(part), 2, 4), (str(part), 2, 4)], target, "h\n") == 4
    assert target.read_text() == "h\na\nb\na\nb\n"
    with pytest.raises(ReconciliationError, match="part-00001 .* missing"):
        export._assemble([(str(part), 2, 4), (str(tmp_path / "part-00001"), 1, 2)], target)
    with pytest.raises(ReconciliationError, match="has 2 lines but its parts' tasks wrote 3"):
        export._assemble([(str(part), 3, 4)], target)
    with pytest.raises(ReconciliationError, match="not the 5 bytes"):
        export._assemble([(str(part), 2, 5)], target)
    with pytest.raises(ReconciliationError, match="train: JSONL queries 3 but BEIR queries of all moves 2"):
        export._same("train: JSONL queries", 3, "BEIR queries of all moves", 2)


@pytest.mark.parametrize("root", ["s3://bucket/release", "dbfs:/ratio/release", "abfss://c@a.dfs.core.windows.net/r"])
def test_an_object_store_root_is_one_line(root):
    with pytest.raises(ConfigError, match="must be a filesystem path") as error:
        export._local_root(root)
    assert "\n" not in str(error.value)
