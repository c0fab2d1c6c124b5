"""Prompt files (versioned, packaged), their checks, the user message, and the silver config section."""

from __future__ import annotations

import pytest

from conftest import REPO_ROOT
from ratio_spark.config import load_config
from ratio_spark.core.config import ConfigError
from ratio_spark.silver.pairs import judge_text
from ratio_spark.silver.prompts import PromptError, load_prompts, select_prompts
from ratio_spark.core.schema import MOVES


def test_packaged_prompts_four_to_six_per_move_and_defaults_exist():
    prompts = load_prompts()
    assert set(prompts) == set(MOVES)
    for move, by_id in prompts.items():
        assert 4 <= len(by_id) <= 6, move
        for p in by_id.values():
            assert p.move == move and p.version.startswith("v") and len(p.sha256) == 12 and "JSON" in p.system
    config = load_config(None)
    assert {m: [p.prompt_id for p in ps] for m, ps in select_prompts(prompts, config.silver.prompts).items()} == config.silver.prompts


def test_package_data_lists_the_prompt_files():
    import tomllib

    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "silver/prompts/*/*.md" in pyproject["tool"]["setuptools"]["package-data"]["ratio_spark"]


def test_messages_follow_the_papers_form():
    prompt = load_prompts()["address"]["ordered-v1"]
    system, user = prompt.messages("Parsing is slow", "to address this issue", "we prune the chart.")
    assert system["role"] == "system" and "ADDRESS" in system["content"]
    assert user["content"] == (
        "Marker: To address this issue\nPassage: Parsing is slow. To address this issue, we prune the chart."
    )
    assert judge_text("Why?  It  fails?", "for example", "x") == "Why? It fails? For example, x"


def test_bad_prompt_files_are_refused(tmp_path):
    (tmp_path / "address").mkdir()
    bad = tmp_path / "address" / "mine-v1.md"
    bad.write_text("no front matter")
    with pytest.raises(PromptError, match="front matter"):
        load_prompts(tmp_path)
    bad.write_text("---\nid: other-v1\nmove: address\n---\nAnswer in JSON.\n")
    with pytest.raises(PromptError, match="file name"):
        load_prompts(tmp_path)
    bad.write_text("---\nid: mine-v1\nmove: specify\n---\nAnswer in JSON.\n")
    with pytest.raises(PromptError, match="folder name"):
        load_prompts(tmp_path)
    bad.write_text("---\nid: mine-v1\nmove: address\n---\nAnswer yes or no.\n")
    with pytest.raises(PromptError, match="JSON"):
        load_prompts(tmp_path)
    bad.write_text("---\nid: mine-v1\nmove: address\n---\nAnswer in JSON.\n")
    prompts = load_prompts(tmp_path)
    with pytest.raises(PromptError, match=r"unknown prompt id\(s\) \['nope-v1'\]; available: \['mine-v1'\]"):
        select_prompts(prompts, {"address": ["nope-v1"]})
    with pytest.raises(PromptError, match="does not exist"):
        load_prompts(tmp_path / "missing")


def test_silver_config_section():
    config = load_config(None, ["silver.sample.specify=500", "silver.prompts.address=[minimal-v1, relaxed-v1]"])
    assert config.silver.sample == {"address": "all", "broaden": "all", "specify": 500}
    assert config.silver.prompts["address"] == ["minimal-v1", "relaxed-v1"]
    assert config.silver.prompts["specify"] == ["ordered-v1", "directional-v1"]  # default kept
    for bad, key in [("silver.sample.vague=3", "unknown move"), ("silver.sample.specify=-1", ">= 0"),
                     ("silver.prompts.address=[]", "no prompt"), ("silver.mode=fast", "silver.mode"),
                     ("silver.prompts.specify=[a-v1, a-v1]", "repeat")]:
        with pytest.raises(ConfigError, match=key):
            load_config(None, [bad])
