"""Run manifests (ratio_spark.evaluation.manifest): the fingerprint changes when a table version, the lexicon or
the config changes, and not otherwise; ``check_manifest`` names what changed; the `evaluate` command writes one
and `--check-manifest` answers; no API key ever lands in it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from ratio_spark.config import load_config
from ratio_spark.evaluation.data import load_split
from ratio_spark.evaluation.manifest import (
    build_manifest,
    check_manifest,
    config_entry,
    lexicon_entry,
    llm_entry,
    write_manifest,
)
from ratio_spark.llm import ModelEndpoint
from ratio_spark.lexicon.loader import SHIPPED_DIR


@pytest.fixture()
def world(tmp_path):
    """Private copies of the eval tables and of lexicon v1, so the test may change them."""
    from conftest import write_eval_tables

    tables = write_eval_tables(tmp_path / "tables")
    lexicon = tmp_path / "lexicons" / "v1"
    shutil.copytree(SHIPPED_DIR / "v1", lexicon)
    return tables, lexicon


def _manifest(tables: Path, lexicon: Path, overrides: list[str] = ()) -> dict:
    config = load_config(None, [f"tables.root={tables}", f"mining.lexicon={lexicon}", *overrides])
    data = load_split(tables, "test")
    inputs = {**data.inputs, "lexicon": lexicon_entry(config.mining.lexicon)}
    return build_manifest("evaluate", config.model_dump(mode="json"), inputs, seeds={"significance": 1})


def test_the_fingerprint_follows_tables_lexicon_and_config_and_nothing_else(world, tmp_path):
    tables, lexicon = world
    base = _manifest(tables, lexicon)
    assert base["inputs"]["table:queries"]["version"] == DeltaTable(str(tables / "queries")).version()
    assert set(base["inputs"]["lexicon"]["files"]) == {"README.md", "markers.tsv", "ordinals.txt"}
    # the same inputs read again: the same fingerprint (timings, dates and output folders do not count)
    again = _manifest(tables, lexicon, ["evaluation.results=/somewhere/else", "evaluation.progress=false"])
    assert again["inputs_sha256"] == base["inputs_sha256"]

    # a new version of a table (the same rows written again is still a new version)
    queries = DeltaTable(str(tables / "queries")).to_pyarrow_table()
    write_deltalake(str(tables / "queries"), queries, partition_by=["split"], mode="overwrite")
    after_table = _manifest(tables, lexicon)
    assert after_table["inputs_sha256"] != base["inputs_sha256"]
    assert after_table["inputs"]["table:queries"]["version"] == base["inputs"]["table:queries"]["version"] + 1
    assert after_table["inputs"]["table:candidates"] == base["inputs"]["table:candidates"]

    # an edited lexicon file
    markers = lexicon / "markers.tsv"
    markers.write_text(markers.read_text() + "\n")
    after_lexicon = _manifest(tables, lexicon)
    assert after_lexicon["inputs_sha256"] != after_table["inputs_sha256"]
    assert after_lexicon["inputs"]["lexicon"]["files"]["markers.tsv"] != after_table["inputs"]["lexicon"]["files"]["markers.tsv"]

    # a changed setting
    after_config = _manifest(tables, lexicon, ["evaluation.depth=50"])
    assert after_config["config"]["sha256"] != after_lexicon["config"]["sha256"]
    assert after_config["inputs_sha256"] != after_lexicon["inputs_sha256"]
    assert after_config["inputs"] == after_lexicon["inputs"]


def test_check_manifest_names_what_changed(world, tmp_path):
    tables, lexicon = world
    manifest = _manifest(tables, lexicon)
    write_manifest(tmp_path / "results", manifest)
    assert check_manifest(tmp_path / "results").same_inputs
    same_config = load_config(None, [f"tables.root={tables}", f"mining.lexicon={lexicon}"]).model_dump(mode="json")
    assert check_manifest(tmp_path / "results", config=same_config).same_inputs

    write_deltalake(str(tables / "candidates"), DeltaTable(str(tables / "candidates")).to_pyarrow_table(),
                    partition_by=["split"], mode="overwrite")
    (lexicon / "ordinals.txt").write_text("firstly\n")
    (lexicon / "notes.txt").write_text("new file\n")
    other_config = load_config(None, [f"tables.root={tables}", f"mining.lexicon={lexicon}", "evaluation.depth=20"])
    check = check_manifest(tmp_path / "results", config=other_config.model_dump(mode="json"))
    assert not check.same_inputs
    text = "\n".join(check.differences)
    assert "table:candidates" in text and "version 1, the run read version 0" in text
    assert "lexicon: ordinals.txt changed" in text and "lexicon: notes.txt is new" in text
    assert text.startswith("config:") or "\nconfig:" in text
    assert "table:queries" not in text and "markers.tsv" not in text

    shutil.rmtree(tables / "queries")
    assert any(line.startswith("table:queries: cannot open") for line in check_manifest(tmp_path / "results").differences)


def test_an_llm_endpoint_is_recorded_by_identity_never_by_key(monkeypatch):
    secret = "sk-test-" + "x" * 40
    monkeypatch.setenv("RATIO_TEST_KEY", secret)
    endpoint = ModelEndpoint(name="gpt", model="gpt-5-mini", api_key_env="RATIO_TEST_KEY", temperature=None,
                             extra_body={"reasoning_effort": "medium"})
    config = {"llm": {"models": [endpoint.model_dump(mode="json")]}}
    manifest = build_manifest("rerank", config, {"llm:gpt": llm_entry(endpoint)})
    text = json.dumps(manifest)
    assert secret not in text and "RATIO_TEST_KEY" in text
    entry = manifest["inputs"]["llm:gpt"]
    assert entry["model"] == "gpt-5-mini" and entry["extra_body"] == {"reasoning_effort": "medium"}
    assert entry["base_url"] == "https://api.openai.com/v1"
    # the bundled local server is named by its weights, not its port
    local = ModelEndpoint(name="gemma", model="g", base_url="http://127.0.0.1:5555/v1", cache_identity="llama.cpp:w")
    moved = local.model_copy(update={"base_url": "http://127.0.0.1:6666/v1"})
    assert llm_entry(local) == llm_entry(moved)


def test_output_only_settings_stay_out_of_the_config_hash():
    a = load_config(None, ["evaluation.results=a"]).model_dump(mode="json")
    b = load_config(None, ["evaluation.results=b", "evaluation.progress=false"]).model_dump(mode="json")
    c = load_config(None, ["evaluation.results=a", "rerank.candidates=50"]).model_dump(mode="json")
    assert config_entry(a)["sha256"] == config_entry(b)["sha256"] != config_entry(c)["sha256"]


def test_evaluate_writes_a_manifest_and_checks_it(world, tmp_path, capsys):
    from ratio_spark.cli.main import main

    tables, lexicon = world
    results = tmp_path / "results"
    args = ["evaluate", "--set", f"tables.root={tables}", "--set", f"mining.lexicon={lexicon}", "--retrievers",
            "bm25-1", "--analyses", "none", "--no-progress", "--results", str(results)]

    def cli(*argv: str) -> tuple[int, str, str]:
        status = main(list(argv))
        out = capsys.readouterr()
        return status, out.out, out.err

    status, _, err = cli(*args)
    assert status == 0, err
    manifest = json.loads((results / "manifest.json").read_text())
    assert manifest["command"] == "evaluate" and manifest["seeds"]["significance"] == 20260
    assert {"table:queries", "table:candidates", "lexicon"} <= set(manifest["inputs"])
    assert manifest["config"]["resolved"]["evaluation"]["retrievers"] == ["bm25-1"]
    assert manifest["code"]["commit"] and "packages" in manifest["environment"]

    status, out, _ = cli(*args, "--check-manifest", str(results))
    assert status == 0 and "would read the same inputs" in out, out
    status, out, _ = cli(*args, "--check-manifest", str(results), "--depth", "50")
    assert status == 1 and "config: sha256" in out
    (lexicon / "markers.tsv").write_text((lexicon / "markers.tsv").read_text() + "\n")
    status, out, _ = cli("evaluate", "--check-manifest", str(results))
    assert status == 1 and "lexicon: markers.tsv changed" in out
    status, _, err = cli("evaluate", "--check-manifest", str(tmp_path))
    assert status == 2 and "no manifest.json" in err
