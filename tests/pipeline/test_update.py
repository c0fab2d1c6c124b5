"""`ratio-spark update` (pipeline/update.py), the living benchmark: a benchmark of four real papers gets two new
ones, a copy of one of its papers under a new id (every pair of it a duplicate of an old one, some with a smaller
pair id) and a changed one. The updated tables equal a full rebuild over the same inputs, row for row, although
mine ran on some papers only and pools rebuilt some splits only; a new duplicate with a smaller pair id moves the
old kept pair to the drops; the changed paper's sentences and pairs are replaced, not added; an update with
nothing new writes no table version; the release before the update reads back exactly through Delta time travel,
and the release's diff matches the tables; the incremental mine fails, writing nothing, when a paper sharing a
text with the new ones is left out."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import (REPO_ROOT, SAMPLE_TEI, _table_versions, assert_same_tables, release_manifest, sample_config,
                      table_names, table_rows)
from ratio_spark.config import Config, load_config
from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.pipeline.runner import run_stage
from ratio_spark.pipeline.settings import SplitRange, SplitsConfig
from ratio_spark.pipeline.stages import PIPELINE

BASE = ["P16-1001", "P16-1008", "P17-1001", "P17-1008"]
NEW = ["P18-1001", "P18-1009"]
CHANGED = "P17-1001"
COPIED, COPY = "P17-1008", "P17-1090"  # the copy is a new paper of the same year: every pair of it a duplicate
ADDED = ("Our method scores every candidate in a single pass over the corpus. "
         "In particular, it ranks each candidate by its word overlap with the query sentence.")


@dataclass
class Updated:
    config: Config  # the benchmark, built from BASE, then updated with the new folder
    rebuilt: Config  # a full rebuild over the same inputs
    before: Path  # a copy of the tables before the update
    summary: dict


def changed_copy(source: Path, target: Path) -> None:
    """The paper with one paragraph added after its first heading: its sentences and pairs change."""
    text = gzip.decompress(source.read_bytes()).decode()
    head_end = text.index("</head>", text.index("<body>")) + len("</head>")
    target.write_text(text[:head_end] + f"<p>{ADDED}</p>" + text[head_end:])


@pytest.fixture(scope="module")
def updated(spark, tmp_path_factory) -> Updated:
    from ratio_spark.pipeline.update import update

    root = tmp_path_factory.mktemp("update")
    base, new = root / "base", root / "new"
    base.mkdir(), new.mkdir()
    for name in BASE:
        shutil.copy(SAMPLE_TEI / f"{name}.tei.xml.gz", base)
    for name in NEW:
        shutil.copy(SAMPLE_TEI / f"{name}.tei.xml.gz", new)
    changed_copy(SAMPLE_TEI / f"{CHANGED}.tei.xml.gz", new / f"{CHANGED}.tei.xml")
    shutil.copy(SAMPLE_TEI / f"{COPIED}.tei.xml.gz", new / f"{COPY}.tei.xml.gz")

    config = sample_config(base, root / "tables", root / "release")
    for stage in PIPELINE:
        run_stage(spark, config, stage)
    shutil.copytree(root / "tables", root / "before")
    summary = update(spark, config, str(new))

    # The same inputs in one full run: the base folder without the old version of the changed paper, and
    # the new folder (the same files, so the same source paths).
    (base / f"{CHANGED}.tei.xml.gz").unlink()
    rebuilt = load_config(REPO_ROOT / "conf" / "sample.yaml", [
        f"inputs.0.path={base}", "inputs.1.name=new", "inputs.1.format=tei", f"inputs.1.path={new}",
        f"tables.root={root / 'rebuilt'}", f"release.root={root / 'rebuilt-release'}"])
    for stage in PIPELINE:
        run_stage(spark, rebuilt, stage)
    return Updated(config, rebuilt, root / "before", summary)


@pytest.mark.slow
def test_an_update_gives_the_tables_of_a_full_rebuild(updated):
    assert updated.summary["papers"] == {"new": len(NEW) + 1, "changed": 1, "unchanged": 0}
    tables = Path(updated.config.tables.root)
    assert "releases" in table_names(tables)
    shutil.copytree(tables, tables.parent / "compared", ignore=shutil.ignore_patterns("releases"))
    assert_same_tables(tables.parent / "compared", Path(updated.rebuilt.tables.root))
    assert release_manifest(Path(updated.config.release.root)) == release_manifest(Path(updated.rebuilt.release.root))
    assert not (tables / "_update").exists()  # the staging tables are gone


@pytest.mark.slow
def test_a_changed_paper_replaces_its_sentences_and_pairs(updated):
    from deltalake import DeltaTable

    def of_paper(root: Path, name: str):
        frame = DeltaTable(str(root / name)).to_pandas()
        return frame[frame["paper_id"] == CHANGED]

    tables = Path(updated.config.tables.root)
    old, now = of_paper(updated.before, "sentences"), of_paper(tables, "sentences")
    assert now["sentence_id"].is_unique
    assert len(now) == len(old) + 2  # the added paragraph's two sentences, the old ones once
    assert any("In particular, it ranks" in t for t in now["text"])
    assert not any("In particular, it ranks" in t for t in old["text"])
    pairs = of_paper(tables, "mined_pairs")
    assert pairs["pair_id"].is_unique
    added = pairs[pairs["gold_text_original"].str.contains("ranks each candidate", na=False)]
    assert list(added["move"]) == ["specify"]  # "In particular" opens a specify pair
    assert sorted(pairs["pair_id"]) == sorted(of_paper(Path(updated.rebuilt.tables.root), "mined_pairs")["pair_id"])
    # The paragraph moved the later ones (para_idx is part of the ids): the old ids are gone, not kept beside.
    stale = set(of_paper(updated.before, "mined_pairs")["pair_id"]) - set(pairs["pair_id"])
    assert stale and not stale & set(DeltaTable(str(tables / "mined_pairs")).to_pandas()["pair_id"])


@pytest.mark.slow
def test_time_travel_reads_the_release_before_the_update_exactly(updated, spark):
    from ratio_spark.pipeline.update import read_release

    release = updated.summary["release"]
    assert release["release"] == 1
    for name in ("papers", "sentences", "mined_pairs", "queries", "candidates", "drops"):
        frame = read_release(spark, updated.config, name, 0).toPandas()
        assert sorted(map(str, frame.astype(str).itertuples(index=False))) == table_rows(updated.before / name), name
    latest = read_release(spark, updated.config, "queries").toPandas()
    assert len(latest) == len(table_rows(Path(updated.config.tables.root) / "queries"))
    # The diff against release 0, from the two states of the tables.
    from deltalake import DeltaTable

    def counts(root: Path, name: str, keys: list[str]) -> dict:
        return DeltaTable(str(root / name)).to_pandas().groupby(keys).size().to_dict()

    tables = Path(updated.config.tables.root)
    before, now = counts(updated.before, "queries", ["split", "move"]), counts(tables, "queries", ["split", "move"])
    assert release["diff"]["new_queries"] == {f"{s}/{m}": now.get((s, m), 0) - before.get((s, m), 0)
                                              for s in SPLITS for m in MOVES}
    assert release["diff"]["new_queries"]["test/specify"] > 0  # the two 2018 papers
    pool_before, pool_now = counts(updated.before, "candidates", ["split"]), counts(tables, "candidates", ["split"])
    assert release["diff"]["pool_growth"] == {s: pool_now.get(s, 0) - pool_before.get(s, 0) for s in SPLITS}
    stored = spark.read.format("delta").load(str(tables / "releases")).orderBy("release").collect()
    assert [r["release"] for r in stored] == [0, 1]
    assert json.loads(stored[1]["diff"]) == release["diff"]


@pytest.mark.slow
def test_an_update_with_nothing_new_writes_no_table_version(updated, spark):
    from ratio_spark.pipeline.update import update

    tables = Path(updated.config.tables.root)
    versions = _table_versions(tables)
    new = Path(updated.config.inputs[0].path).parent / "new"
    summary = update(spark, updated.config, str(new))
    assert summary["papers"] == {"new": 0, "changed": 0, "unchanged": len(NEW) + 2}
    assert summary["release"] is None
    assert _table_versions(tables) == versions


def test_an_update_of_tables_older_than_the_code_stops_before_staging_anything(updated, spark, tmp_path):
    from ratio_spark.pipeline.update import UpdateError, update

    tables = tmp_path / "tables"
    shutil.copytree(updated.before, tables)
    older = spark.read.format("delta").load(str(tables / "mined_pairs")).drop("marker_source")  # as before that column
    older.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(str(tables / "mined_pairs"))
    config = sample_config(Path(updated.config.inputs[0].path), tables, tmp_path / "release")
    versions = _table_versions(tables)
    new = Path(updated.config.inputs[0].path).parent / "new"
    with pytest.raises(UpdateError, match=r"table 'mined_pairs' at .* is older than this code \(missing column\(s\) "
                                          r"\['marker_source'\]\): rebuild"):
        update(spark, config, str(new))
    assert not (tables / "_update").exists() and _table_versions(tables) == versions


def test_rolling_splits_end_with_the_month_of_the_latest_paper():
    splits = SplitsConfig(train=SplitRange(start="2010-01-01", end="2010-12-31"),
                          validation=SplitRange(start="2011-01-01", end="2011-12-31"),
                          test=SplitRange(start="2012-01-01", end="2012-12-31"),
                          rolling={"test_months": 3, "validation_months": 2})
    resolved = splits.resolved(dt.date(2026, 2, 14))
    assert (resolved.test.start, resolved.test.end) == (dt.date(2025, 12, 1), dt.date(2026, 2, 28))
    assert (resolved.validation.start, resolved.validation.end) == (dt.date(2025, 10, 1), dt.date(2025, 11, 30))
    assert (resolved.train.start, resolved.train.end) == (dt.date(2010, 1, 1), dt.date(2025, 9, 30))
    assert splits.resolved(None) is splits
    assert SplitsConfig().resolved(dt.date(2026, 2, 14)) == SplitsConfig()  # fixed splits stay as configured


def delta_rows(root: Path, name: str):
    from deltalake import DeltaTable

    return DeltaTable(str(root / name)).to_pandas()


@pytest.mark.slow
def test_a_new_duplicate_with_a_smaller_pair_id_moves_the_kept_pair_to_the_drops(updated):
    before, tables = delta_rows(updated.before, "mined_pairs"), delta_rows(Path(updated.config.tables.root), "mined_pairs")
    kept_before = set(before[before["paper_id"] == COPIED]["pair_id"])
    kept_now = tables.set_index("pair_id")
    drops = delta_rows(Path(updated.config.tables.root), "drops")
    duplicates = drops[(drops["stage"] == "mine") & (drops["reason"] == "duplicate_pair")].set_index("item_id")
    displaced = kept_before - set(kept_now.index)
    assert displaced, "the copy should have a smaller pair id than some kept pair of the copied paper"
    for pair_id in displaced:
        first = duplicates.loc[pair_id, "detail"].removeprefix("same query and gold text as ")
        assert kept_now.loc[first, "paper_id"] == COPY and first < pair_id
        old = before.set_index("pair_id").loc[pair_id]
        assert (kept_now.loc[first, "query_text"], kept_now.loc[first, "gold_text"]) == (old["query_text"], old["gold_text"])
    # And the other way round: copied pairs with a larger id are the copy's duplicates, the old ones stay.
    stayed = kept_before & set(kept_now.index)
    assert stayed and set(duplicates[duplicates["paper_id"] == COPY]["detail"].str.removeprefix(
        "same query and gold text as ")) >= stayed


@pytest.mark.slow
def test_the_summary_says_what_ran_incrementally_and_which_splits_were_rebuilt(updated):
    summary = updated.summary
    assert summary["incremental"] == ["ingest", "segment", "mine", "pools"]
    assert summary["rerun"] == ["citations", "export"]
    papers = delta_rows(Path(updated.config.tables.root), "papers")
    dates = papers[papers["paper_id"].isin([*NEW, CHANGED, COPY])]["pub_date"]
    ranges = updated.config.splits.ranges()
    ranks = {SPLITS.index(s) for d in dates for s, r in ranges.items() if r.start <= d <= r.end}
    assert summary["splits_rebuilt"] == list(SPLITS[min(ranks):]) and "train" not in summary["splits_rebuilt"]
    mine = summary["stages"]["mine"]
    assert mine["papers_new_or_changed"] == len(NEW) + 2
    assert mine["papers_sharing_a_text"] >= 1  # the copied paper at least
    assert mine["papers_mined"] == mine["papers_new_or_changed"] + mine["papers_sharing_a_text"]
    assert all(" = " in line for line in mine["reconciled"])


@pytest.mark.slow
def test_the_incremental_mine_fails_and_writes_nothing_when_a_paper_sharing_a_text_is_left_out(
        updated, spark, tmp_path, monkeypatch):
    import ratio_spark.pipeline.mine as mine
    from ratio_spark.core.errors import ReconciliationError
    from ratio_spark.pipeline.stages import MINE_PAPERS
    from ratio_spark.pipeline.runner import run_stage

    # The benchmark before the update with the sentences after it: the copy's sentences are there, its pairs not.
    shutil.copytree(updated.before, tmp_path / "tables")
    shutil.rmtree(tmp_path / "tables" / "sentences")
    shutil.copytree(Path(updated.config.tables.root) / "sentences", tmp_path / "tables" / "sentences")
    config = sample_config(Path(updated.config.inputs[0].path), tmp_path / "tables", tmp_path / "release")
    versions = _table_versions(tmp_path / "tables")
    monkeypatch.setattr(mine, "papers_sharing_texts", lambda mined_pairs, drops, texts: mined_pairs.limit(0).select("paper_id"))
    with pytest.raises(ReconciliationError, match="would change"):
        run_stage(spark, config, MINE_PAPERS, papers=[COPY], examined_before={})
    assert _table_versions(tmp_path / "tables") == versions


@pytest.mark.slow
def test_an_update_after_one_that_stopped_half_way_rebuilds_the_derived_tables(updated, spark, tmp_path):
    from ratio_spark.pipeline.tables import write_table
    from ratio_spark.pipeline.update import update

    # A stopped update: mine_pairs lost a row in a commit that no release records.
    shutil.copytree(Path(updated.config.tables.root), tmp_path / "tables")
    config = sample_config(Path(updated.config.inputs[0].path), tmp_path / "tables", tmp_path / "release")
    mined = spark.read.format("delta").load(str(tmp_path / "tables" / "mined_pairs"))
    write_table(mined.filter(mined.pair_id != mined.first()["pair_id"]), str(tmp_path / "tables" / "mined_pairs"))
    summary = update(spark, config, str(Path(updated.config.inputs[0].path).parent / "new"))
    assert summary["papers"]["new"] + summary["papers"]["changed"] == 0
    assert summary["rerun"] == ["mine", "citations", "pools", "export"] and summary["splits_rebuilt"] == list(SPLITS)
    assert summary["release"]["release"] == 2
    shutil.copytree(tmp_path / "tables", tmp_path / "compared", ignore=shutil.ignore_patterns("releases"))
    assert_same_tables(tmp_path / "compared", Path(updated.rebuilt.tables.root))


# --- concurrent writers (issue 30): two updates at once, and evaluate reading while one commits ---


def _update_process(inputs: Path, base: Path, tables: Path, release: Path, log: Path) -> subprocess.Popen:
    """``ratio-spark update`` in its own process, its output to files: a pipe nobody reads while it runs fills
    up, and Spark's logger then blocks the process for good."""
    return subprocess.Popen(
        [sys.executable, "-m", "ratio_spark.cli.main", "update", "--conf", str(REPO_ROOT / "conf" / "sample.yaml"),
         "--set", f"inputs.0.path={base}", "--set", f"tables.root={tables}", "--set", f"release.root={release}",
         "--set", "spark.conf.spark.driver.memory=2g", "--inputs", str(inputs)],
        stdout=open(log.with_suffix(".out"), "w"), stderr=open(log.with_suffix(".err"), "w"), text=True)


def _outcome(process: subprocess.Popen, log: Path) -> tuple[int, str, str]:
    process.wait()
    for stream in (process.stdout, process.stderr):
        if stream:
            stream.close()
    return process.returncode, log.with_suffix(".out").read_text(), log.with_suffix(".err").read_text()


def _evaluate_once(tables: Path, results: Path) -> dict:
    """``ratio-spark evaluate`` (BM25, the validation split: the base benchmark's 2017 papers, rebuilt by the
    update) on the tables as they are now: the versions its manifest names, and the query ids its run holds."""
    from ratio_spark.cli.main import main

    assert main(["evaluate", "--set", f"tables.root={tables}", "--split", "validation", "--retrievers", "bm25-1",
                 "--analyses", "none", "--results", str(results), "--no-progress"]) == 0
    manifest = json.loads((results / "manifest.json").read_text())
    entries = _delta_entries(manifest)
    versions = {Path(e["location"]).name: e["version"] for e in entries}
    ran = {line.split()[0] for path in (results / "runs" / "bm25-1").glob("*.trec") for line in path.read_text().splitlines()}
    return {"versions": versions, "query_ids": ran}


def _delta_entries(node) -> list[dict]:
    if isinstance(node, dict):
        found = [node] if node.get("kind") == "delta" else []
        return found + [e for value in node.values() for e in _delta_entries(value)]
    if isinstance(node, list):
        return [e for value in node for e in _delta_entries(value)]
    return []


@pytest.mark.slow
def test_two_updates_at_once_one_commits_one_stops_with_one_line_and_evaluate_reads_one_version(updated, tmp_path):
    from deltalake import DeltaTable

    tables, release = tmp_path / "tables", tmp_path / "release"
    shutil.copytree(updated.before, tables)
    base = Path(updated.config.inputs[0].path)
    new = base.parent / "new"
    lock = tables / "_update.lock"
    first = _update_process(new, base, tables, release, tmp_path / "first")
    deadline = time.monotonic() + 300
    while not (lock.exists() and lock.read_text().startswith("pid ")):  # the first holds the lock
        assert first.poll() is None and time.monotonic() < deadline, _outcome(first, tmp_path / "first")
        time.sleep(0.05)
    second = _update_process(new, base, tables, release, tmp_path / "second")
    readings = []
    while first.poll() is None or second.poll() is None:  # evaluate reads while the update commits
        readings.append(_evaluate_once(tables, tmp_path / f"eval-{len(readings)}"))
        time.sleep(1)  # a reading a second: evaluating back to back took a core from the updates on two
    readings.append(_evaluate_once(tables, tmp_path / f"eval-{len(readings)}"))
    outcomes = sorted([_outcome(first, tmp_path / "first"), _outcome(second, tmp_path / "second")])
    (won, _, _), (lost, _, stderr) = outcomes
    assert (won, lost) == (0, 1), outcomes
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("ratio-spark update: error: another `ratio-spark update` is writing the tables at "), stderr
    # The tables equal a single update's (a full rebuild over the same inputs, as the fixture's update gives).
    shutil.copytree(tables, tmp_path / "compared", ignore=shutil.ignore_patterns("releases", "_update.lock"))
    assert_same_tables(tmp_path / "compared", Path(updated.rebuilt.tables.root))
    assert sorted(r["release"] for r in DeltaTable(str(tables / "releases")).to_pandas().to_dict("records")) == [0, 1]
    # Each evaluation read one version of each table, the one its manifest names: its queries are that version's.
    for reading in readings:
        version = reading["versions"]["queries"]
        at = DeltaTable(str(tables / "queries"), version=version).to_pandas()
        assert reading["query_ids"] == set(at[at["split"] == "validation"]["query_id"]), version
    seen = [r["versions"]["queries"] for r in readings]
    assert seen[0] == _table_versions(updated.before)["queries"] and seen[-1] == _table_versions(tables)["queries"] > seen[0]
