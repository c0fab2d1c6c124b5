"""Pairs formed in reading order (``pipeline/ordered_pairs.py``) against the window's pairs: the stream never
invents a pair, and every pair it leaves out is one its heads name; mine's outputs are the same row for row
whether the pairs come from the stream or the shuffle, in every layout a table can have."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest

from ratio_spark.pipeline.ordered_pairs import BLOCK, OPENS, PairStream


def _rows(n_papers: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for p in range(n_papers):
        for section in range(rng.randint(1, 3)):
            for para in range(rng.randint(1, 3)):
                for sent in range(rng.randint(1, 6)):
                    rows.append({"sentence_id": f"P{p}:{section}:{para}:{sent}", "paper_id": f"P{p}",
                                 "pub_date": dt.date(2014 + p % 3, 1, 1), "section_idx": section, "para_idx": para,
                                 "sent_idx": sent, "text": f"T{p}.{section}.{para}.{sent}",
                                 "norm_text": f"t{p}.{section}.{para}.{sent}", "norm_flag": None, "year": 2014 + p % 3,
                                 OPENS: True})
    return rows


def _true_pairs(rows: list[dict]) -> dict[str, tuple[str, str | None]]:
    """gold sentence id -> (query sentence id, context norm text): the window's pairs."""
    by_position = {(r["paper_id"], r["section_idx"], r["para_idx"], r["sent_idx"]): r for r in rows}
    pairs = {}
    for (paper, section, para, sent), row in by_position.items():
        query = by_position.get((paper, section, para, sent - 1))
        if query is not None:
            context = by_position.get((paper, section, para, sent - 2))
            pairs[row["sentence_id"]] = (query["sentence_id"], context["norm_text"] if context else None)
    return pairs


def _stream(partitions: list[list[dict]], rng: random.Random):
    """Every partition's rows through a PairStream in batches of random sizes."""
    pairs, counts, edges, heads = {}, {}, [], []
    for rows in partitions:
        stream = PairStream()
        steps, at = [], 0
        while at < len(rows):
            size = rng.randint(1, 7)
            steps.append(stream.feed(pa.Table.from_pylist(rows[at: at + size])))
            at += size
        steps.append(stream.finish())
        for found, counted, edge, head in steps:
            for row in found.to_pylist():
                assert row["gold_sentence_id"] not in pairs, "a pair formed twice"
                pairs[row["gold_sentence_id"]] = (row["query_sentence_id"], row["context_text"])
            for year, n in counted.items():
                counts[year] = counts.get(year, 0) + n
            edges += edge.column("sentence_id").to_pylist() if edge.num_rows else []
            heads += head.to_pylist()
    return pairs, counts, set(edges), heads


@pytest.mark.parametrize("layout", ["in order", "split files", "shuffled"])
def test_the_stream_forms_true_pairs_and_names_every_pair_it_leaves_out(layout):
    rng = random.Random(7)
    rows = _rows(30, seed=1)
    blocks = [0] * len(rows)
    if layout == "split files":  # a new block every few rows, cutting paragraphs; the blocks spread over 3 partitions
        block = 0
        for i in range(len(rows)):
            if rng.random() < 0.15:
                block += 1
            blocks[i] = block
    for row, block in zip(rows, blocks):
        row[BLOCK] = block
    if layout == "shuffled":
        rng.shuffle(rows)
    partitions = [[r for r in rows if r[BLOCK] % 3 == part] for part in range(3)]
    pairs, counts, edges, heads = _stream(partitions, rng)

    truth = _true_pairs(rows)
    assert all(truth[gold] == found for gold, found in pairs.items())  # never a pair (or context) that is not true
    assert sum(counts.values()) == len(pairs)
    named = {(h["paper_id"], h["section_idx"], h["para_idx"], h["sent_idx"] + d) for h in heads for d in (0, 1)}
    left_out = {gold for gold in truth if gold not in pairs}
    assert all(tuple(r[k] for k in ("paper_id", "section_idx", "para_idx", "sent_idx")) in named
               for r in rows if r["sentence_id"] in left_out)
    if layout == "in order":
        assert not heads and len(pairs) == len(truth)
    if layout == "split files":
        assert heads and all(h["at_block_start"] for h in heads) and left_out
        for part in partitions:  # every run of a block: its first two and last two rows are edges
            runs: list[list[dict]] = []
            for row in part:
                if not runs or runs[-1][-1][BLOCK] != row[BLOCK]:
                    runs.append([])
                runs[-1].append(row)
            assert all({r["sentence_id"] for r in run[:2] + run[-2:]} <= edges for run in runs)
    if layout == "shuffled":
        assert any(not h["at_block_start"] for h in heads)


@pytest.fixture(scope="module")
def mining_setup(spark, sample_segmented):
    from ratio_spark.lexicon.loader import load_lexicon

    config = sample_segmented.config
    return spark.read.format("delta").load(str(sample_segmented.tables_root / "sentences")), \
        load_lexicon(config.mining.lexicon), config.mining


def _outputs(spark, sentences, lexicon, config, in_order: bool, table: str | None = None):
    from ratio_spark.pipeline.mine import mine_pairs

    mining = mine_pairs(spark, sentences, lexicon, config, in_order=in_order, table=table)
    try:
        return (mining.pairing, sorted((r["year"], r["count"]) for r in mining.examined.collect()),
                sorted(map(tuple, mining.mined.collect())), sorted(map(tuple, mining.drops.collect())))
    finally:
        mining.scanned.unpersist()


@pytest.mark.spark
def test_mine_has_the_same_outputs_from_the_stream_and_from_the_shuffle(spark, mining_setup, tmp_path, monkeypatch):
    import ratio_spark.pipeline.mine as mine

    sentences, lexicon, config = mining_setup
    by_shuffle = _outputs(spark, sentences, lexicon, config, in_order=False)
    assert by_shuffle[2], "the sample mines no pair: nothing compared"

    as_written = _outputs(spark, sentences, lexicon, config, in_order=True)
    assert as_written[0] == "pairs formed in reading order" and as_written[1:] == by_shuffle[1:]

    # Files of 7 rows: paragraphs run on across files, their pairs come from the edges.
    spark.conf.set("spark.sql.files.maxRecordsPerFile", "7")
    try:
        sentences.write.format("delta").save(str(tmp_path / "split"))
    finally:
        spark.conf.unset("spark.sql.files.maxRecordsPerFile")
    split = _outputs(spark, spark.read.format("delta").load(str(tmp_path / "split")), lexicon, config, in_order=True)
    assert "across file splits formed from their edges" in split[0] and "read again" not in split[0]
    assert split[1:] == by_shuffle[1:]

    # Out of reading order: a few papers out of place are read again; many, and the shuffle forms every pair.
    from pyspark.sql import functions as F

    shuffled = sentences.repartition(3, F.rand(seed=3)).sortWithinPartitions(F.rand(seed=5))
    monkeypatch.setattr(mine, "MAX_PAPERS_READ_AGAIN", 10**6)
    read_again = _outputs(spark, shuffled, lexicon, config, in_order=True)
    assert "read again" in read_again[0] and read_again[1:] == by_shuffle[1:]
    monkeypatch.setattr(mine, "MAX_LOOSE_ROWS", 10)
    fallback = _outputs(spark, shuffled, lexicon, config, in_order=True)
    assert fallback[0].startswith("pairs formed by a shuffle (over 10 sentences out of reading order") and fallback[1:] == by_shuffle[1:]


@pytest.mark.spark
def test_mine_has_the_same_outputs_when_the_python_workers_read_the_files(spark, mining_setup, tmp_path, monkeypatch):
    """The pass reading the table's Parquet files itself (``mine_pairs(table=...)``) against Spark's scan: the
    table as written; in one file of many row groups cut into pieces (at a path with a space); and a table with
    deletion vectors, which Spark must read (its files still hold the deleted rows)."""
    import pyarrow.parquet as pq

    import ratio_spark.pipeline.mine as mine
    from ratio_spark.pipeline.mine import _arrow_uri, _files_of, _snapshot, pieces_to_read

    sentences, lexicon, config = mining_setup
    by_scan = _outputs(spark, sentences, lexicon, config, in_order=True)
    assert by_scan[2], "the sample mines no pair: nothing compared"
    path = sentences.inputFiles()[0].rsplit("/", 1)[0]
    direct = _outputs(spark, sentences, lexicon, config, in_order=True, table=path)
    assert direct[0] == "pairs formed in reading order (the Python workers read the Parquet files)"
    assert direct[1:] == by_scan[1:]

    # One file of row groups of ~4 KB, read in pieces of 16 KB: paragraphs run on across pieces.
    one_file = str(tmp_path / "with space" / "one file")
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.setInt("parquet.block.size", 4096)
    try:
        sentences.coalesce(1).write.format("delta").save(one_file)
    finally:
        hadoop.unset("parquet.block.size")
    table = spark.read.format("delta").load(one_file)
    (uri,) = table.inputFiles()
    assert pq.ParquetFile(uri.removeprefix("file:")).metadata.num_row_groups > 4
    spark.conf.set("spark.sql.files.maxPartitionBytes", "16384")
    try:
        pieces, _ = pieces_to_read(spark, table, one_file)
        in_pieces = _outputs(spark, table, lexicon, config, in_order=True, table=one_file)
        with monkeypatch.context() as patched:  # where deltalake cannot read the location, Spark lists the files
            patched.setattr(mine, "_files_of", lambda version, location: None)
            listed_by_spark = pieces_to_read(spark, table, one_file)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert len(pieces) > 2
    # deltalake listed the file of the version Spark read (not Spark's job, the fallback): the same URI.
    version, _, location = _snapshot(spark, one_file)
    assert _files_of(version, location) is not None
    assert {piece[0] for piece in pieces} == {_arrow_uri(uri)}
    assert listed_by_spark == (pieces, "")
    assert "(the Python workers read the Parquet files) (" in in_pieces[0] and "formed from their edges" in in_pieces[0]
    assert in_pieces[1:] == by_scan[1:]

    # Deletion vectors: the files hold rows the table does not.
    with_dv = str(tmp_path / "deletion vectors")
    sentences.write.format("delta").option("delta.enableDeletionVectors", "true").save(with_dv)
    from delta.tables import DeltaTable

    DeltaTable.forPath(spark, with_dv).delete("sent_idx > 40")  # no pair of the sample reaches this far
    deleted = _outputs(spark, spark.read.format("delta").load(with_dv), lexicon, config, in_order=True, table=with_dv)
    assert deleted[0] == "pairs formed in reading order (Spark reads the sentences: the table has deletion vectors)"
    assert deleted[1:] == by_scan[1:]


@pytest.mark.spark
def test_every_twin_of_a_mined_pair_is_a_duplicate(spark, mining_setup):
    """The sample with every paper twice (new paper and sentence ids, the same texts): the same number of mined
    pairs as the sample once, and a group of k pairs of one (query, gold) text becomes 2k with one kept."""
    from pyspark.sql import functions as F

    sentences, lexicon, config = mining_setup
    twins = sentences.withColumn("paper_id", F.concat("paper_id", F.lit("-twin"))).withColumn(
        "sentence_id", F.concat("sentence_id", F.lit("-twin")))
    once = _outputs(spark, sentences, lexicon, config, in_order=True)
    both = _outputs(spark, sentences.unionByName(twins), lexicon, config, in_order=True)
    duplicates = lambda outputs: sum(1 for row in outputs[3] if "duplicate_pair" in row)
    assert len(both[2]) == len(once[2]) > 0
    assert duplicates(both) == len(once[2]) + 2 * duplicates(once)
    # Of each pair and its twin, the one with the smaller pair id is kept.
    import hashlib

    from ratio_spark.core.schema import TABLES

    pair_id = lambda query, gold: "p" + hashlib.sha256(f"{query}|{gold}".encode()).hexdigest()[:16]
    columns = list(TABLES["mined_pairs"].column_names)
    ids = lambda row: (row[columns.index("query_sentence_id")], row[columns.index("gold_sentence_id")])
    smaller = {min(pair_id(*ids(row)), pair_id(*(i + "-twin" for i in ids(row)))) for row in once[2]}
    assert {row[0] for row in both[2]} == smaller
