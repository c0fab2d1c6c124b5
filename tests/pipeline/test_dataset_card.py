"""The release's dataset card (README.md, written by export): Hugging Face `datasets` loads every config of the
shared sample's release offline, with the counts of the manifest; the card's licence comes from the corpus's
configuration and its hashes are the files' own; a rerun gives the same files and hashes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.pipeline.dataset_card import ReleaseAbout, card_configs, card_text


def header(text: str) -> dict:
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "no YAML header"
    return yaml.safe_load(match.group(1))


@pytest.fixture(scope="module")
def release(sample_benchmark) -> Path:
    return Path(sample_benchmark.config.release.root)


def test_datasets_loads_every_config_of_the_release_with_the_manifests_counts(release, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    manifest = json.loads((release / "manifest.json").read_text())
    configs = header((release / "README.md").read_text())["configs"]
    names = [c["config_name"] for c in configs]
    moves = sorted(manifest["beir"])
    assert names == ["queries", "candidates"] + [f"{m}-{p}" for m in moves for p in ("queries", "corpus")]

    def load(name):
        return datasets.load_dataset(str(release), name, cache_dir=str(tmp_path / "hf"))

    queries, candidates = load("queries"), load("candidates")
    parquet = {s: pq.read_table(release / "parquet" / s / "queries").to_pylist() for s in manifest["splits"]}
    for split, counts in manifest["splits"].items():
        assert queries[split].num_rows == counts["queries"] and candidates[split].num_rows == counts["candidates"]
        by_move = {m: n for m in MOVES if (n := sum(1 for x in queries[split]["move"] if x == m))}
        assert by_move == {m: n for m, n in counts["queries_by_move"].items() if n}
        as_loaded = {r["query_id"]: (r["query_text"], r["gold_candidate_id"]) for r in queries[split]}
        assert as_loaded == {r["query_id"]: (r["query_text"], r["gold_candidate_id"]) for r in parquet[split]}
    assert {"query_id", "query_text", "gold_candidate_id", "exclude_candidate_ids", "marker", "pub_date"} <= set(
        queries["test"].column_names)
    for move in moves:
        per_move = {part: load(f"{move}-{part}") for part in ("queries", "corpus")}
        assert sorted(per_move["queries"]) == sorted(manifest["beir"][move])
        for split, counts in manifest["beir"][move].items():
            assert per_move["queries"][split].num_rows == counts["queries"]
            assert per_move["corpus"][split]["_id"] == candidates[split]["candidate_id"]  # the whole pool, same order
            expected = {r["query_id"]: (r["query_text"], r["gold_candidate_id"], r["exclude_candidate_ids"])
                        for r in queries[split] if r["move"] == move}
            assert {r["_id"]: (r["text"], r["gold_candidate_id"], r["exclude_candidate_ids"])
                    for r in per_move["queries"][split]} == expected
    assert any(r["exclude_candidate_ids"] for r in queries["test"])  # the sample has queries whose own sentence is pooled


def test_the_card_names_the_corpus_licence_the_counts_and_the_files_hashes(release, sample_benchmark):
    from ratio_spark.core.provenance import sha256_file

    text = (release / "README.md").read_text()
    manifest = json.loads((release / "manifest.json").read_text())
    meta = header(text)
    assert meta["license"] == sample_benchmark.config.release.license == manifest["license"] == "cc-by-4.0"
    assert "CC BY 4.0" in text and meta["pretty_name"] == sample_benchmark.config.release.name
    test = manifest["splits"]["test"]
    assert f"| test | {' | '.join(str(test['queries_by_move'].get(m, 0)) for m in MOVES)} | {test['queries']} | " \
           f"{test['candidates']} |" in text
    assert "lexicon: v1" in text and "test 2018-01-01 .. 2018-12-31" in text and "per 1,000 pairs examined" in text
    listed = dict(re.findall(r"^\| `([^`]+)` \| ([0-9a-f]{64}) \|$", text, re.M))
    on_disk = {p.relative_to(release).as_posix() for p in release.rglob("*")
               if p.is_file() and p.name not in ("manifest.json", "README.md")}
    assert set(listed) == on_disk
    parquet = [p for p in on_disk if p.startswith("parquet/")]
    assert parquet and all(re.fullmatch(r"parquet/\w+/(queries|candidates)/part-\d{5}\.parquet", p) for p in parquet)
    assert {p: sha256_file(release / p) for p in listed} == listed
    assert manifest["sha256"] == {**listed, "README.md": sha256_file(release / "README.md")}
    yields = [json.loads(line) for line in (release / "stats" / "stats_yield.jsonl").read_text().splitlines()]
    assert {r["label"] for r in yields if r["role"] == "move"} >= {"all"}


def test_a_rerun_of_the_export_gives_the_same_files_and_hashes(spark, sample_benchmark, tmp_path):
    from ratio_spark.pipeline.export import export_release

    tables = sample_benchmark.tables_root
    queries = spark.read.format("delta").load(str(tables / "queries"))
    candidates = spark.read.format("delta").load(str(tables / "candidates"))
    first = export_release(queries, candidates, tmp_path / "a")
    second = export_release(queries, candidates, tmp_path / "b")
    assert first["sha256"] == second["sha256"] and len(first["sha256"]) > 10
    assert not list((tmp_path / "a" / "parquet").rglob("_SUCCESS")) and not list((tmp_path / "a").rglob("*.crc"))
    assert first["license"] == "unknown" and header((tmp_path / "a" / "README.md").read_text())["license"] == "unknown"


def test_configs_list_only_splits_and_moves_with_rows():
    manifest = {"splits": {"train": {"queries": 3, "candidates": 9, "queries_by_move": {"specify": 3}},
                           "validation": {"queries": 0, "candidates": 4, "queries_by_move": {}},
                           "test": {"queries": 1, "candidates": 5, "queries_by_move": {"specify": 1}}},
                "beir": {"specify": {"train": {"queries": 3, "corpus": 9}, "test": {"queries": 1, "corpus": 5}}}}
    configs = {c["config_name"]: [f["split"] for f in c["data_files"]] for c in card_configs(manifest)}
    assert configs == {"queries": ["train", "test"], "candidates": list(SPLITS), "specify-queries": ["train", "test"],
                       "specify-corpus": ["train", "test"]}
    text = card_text(manifest, ReleaseAbout(name="Tiny", license="mit", license_note="for tests"), {"a.jsonl": "0" * 64})
    assert header(text)["configs"][2]["data_files"][1] == {"split": "test", "path": "beir/specify/test/queries.jsonl"}
    assert "| validation | 0 | 0 | 0 | 0 | 4 |" in text and "`mit`: for tests" in text
