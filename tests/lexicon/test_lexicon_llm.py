"""LLM generation and labelling of marker candidates: prompt files, marker cleaning, candidate and
label files, and the ``ratio-spark lexicon-llm`` command end to end against the real local server
(llama.cpp + gemma 3 270M). That base model writes junk markers: the end-to-end test checks the
plumbing (rows written, labels valid, provenance, rerun served from the cache), not their quality.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import REPO_ROOT
from ratio_spark.cli.main import main
from ratio_spark.lexicon.curation.formats import CANDIDATE_COLUMNS, LABEL_COLUMNS, LABELS
from ratio_spark.lexicon.curation.llm import (
    GENERATE_PROMPT, LABEL_PROMPT, LexiconLLMError, clean_marker, load_moves, load_prompt, merge_candidates,
    merge_labels, move_values, read_all_candidates, read_rows, write_rows,
)



def test_prompt_files_render_definitions_subcategories_and_seeds():
    moves = load_moves()
    assert {"address", "broaden", "specify"} <= set(moves["moves"])
    generate = load_prompt(GENERATE_PROMPT)
    assert generate.id == "generate_markers.v1"
    messages = generate.render(**move_values(moves, "address"), seeds="- to remedy this", n="7", exclude="")
    user = messages[1]["content"]
    assert messages[0]["role"] == "system" and "JSON" in messages[0]["content"]
    for text in ("alleviate", "avoid or eliminate", "bypass", "mitigate", "solve", "- to remedy this", "Propose 7 NEW",
                 "refers back to the preceding sentence"):
        assert text in user, text
    label = load_prompt(LABEL_PROMPT)
    text = label.render(**move_values(moves, "broaden"), marker="more broadly")[1]["content"]
    assert '"more broadly"' in text and "strong_true" in text and "weak_true" in text and "Broaden" in text
    assert "$" not in text


def test_prompt_and_move_errors_are_clear(tmp_path):
    with pytest.raises(LexiconLLMError, match="name.vN.txt"):
        load_prompt("generate.txt")
    (tmp_path / "broken.v1.txt").write_text("[user]\nhello $who\n")
    with pytest.raises(LexiconLLMError, match=r"\[system\] and a \[user\] section"):
        load_prompt("broken.v1.txt", tmp_path)
    with pytest.raises(LexiconLLMError, match="move 'analogy' has no definition"):
        move_values(load_moves(), "analogy")
    with pytest.raises(LexiconLLMError, match=r"needs a value for \$marker"):
        load_prompt(LABEL_PROMPT).render(**move_values(load_moves(), "address"))


@pytest.mark.parametrize("raw, expected", [
    ("To Mitigate This Issue,", ("to mitigate this issue", None)),
    ('  "More broadly"  ', ("more broadly", None)),
    ("to  overcome\tthis.", ("to overcome this", None)),
    ("", (None, "empty")),
    ("{x}", (None, "not_a_phrase")),
    ("one two three four five six seven eight nine ten eleven", (None, "too_long")),
    (42, (None, "not_text")),
])
def test_clean_marker(raw, expected):
    assert clean_marker(raw) == expected


def test_files_round_trip_and_merge(tmp_path):
    path = tmp_path / "candidates" / "llm.tsv"
    rows = [{"marker": "to sidestep this", "move": "address", "source": "llm", "provenance": '{"model":"a","models":["a"]}'}]
    write_rows(path, rows, CANDIDATE_COLUMNS)
    assert path.read_text().splitlines()[0] == "marker\tmove\tsource\tprovenance"
    assert read_rows(path, CANDIDATE_COLUMNS) == rows
    again = [{**rows[0], "provenance": '{"model":"b","models":["b"]}'},
             {"marker": "more broadly", "move": "broaden", "source": "llm", "provenance": "{}"}]
    merged = merge_candidates(rows, again)
    assert len(merged) == 2 and json.loads(merged[0]["provenance"])["models"] == ["a", "b"]
    labels = [{"marker": "m", "move": "address", "label": "false", "labeller": "x+label_marker.v1",
               "reason": '"quoted"\twith tab\nand newline'}]
    write_rows(tmp_path / "candidates" / "labels.tsv", labels, LABEL_COLUMNS)
    [back] = read_rows(tmp_path / "candidates" / "labels.tsv", LABEL_COLUMNS)
    assert back["reason"] == labels[0]["reason"]  # quoted on disk (tab, newline, leading quote), exact on reading
    newer = [{**labels[0], "label": "weak_true"}]
    assert [r["label"] for r in merge_labels(labels, newer)] == ["weak_true"]
    # By default only generated sources are labelled (curated spans are not); never labels.tsv.
    write_rows(tmp_path / "candidates" / "spans.tsv", [{"marker": "for example", "move": "specify", "source": "manual",
                                                        "provenance": "{}"}], CANDIDATE_COLUMNS)
    assert [r["marker"] for r in read_all_candidates(tmp_path / "candidates")] == ["to sidestep this"]
    assert [r["marker"] for r in read_all_candidates(tmp_path / "candidates", ["spans"])] == ["for example"]
    with pytest.raises(LexiconLLMError, match="no candidate file pattern.tsv"):
        read_all_candidates(tmp_path / "candidates", ["pattern"])
    with pytest.raises(LexiconLLMError, match="missing columns"):
        read_rows(tmp_path / "candidates" / "labels.tsv", CANDIDATE_COLUMNS)


def test_command_without_endpoints_says_what_to_configure(tmp_path, capsys):
    code = main(["lexicon-llm", "label", "--version", "vx", "--lexicon-root", str(tmp_path)])
    assert code == 2
    assert "no LLM endpoints configured" in capsys.readouterr().err


SEED_LEXICON = """marker\trole\tlabel\tsource\textendable\tevidence
to remedy\tmove\taddress\textension\ttrue\ttest seed
to answer this question\tmove\taddress\tmanual\tfalse\ttest seed
more generally\tmove\tbroaden\tmanual\tfalse\ttest seed
in general\tdistractor\tother\tmanual\tfalse\ttest seed
"""


@pytest.mark.slow
def test_generate_and_label_end_to_end_against_the_local_server(llm_server, tmp_path):
    seed_dir = tmp_path / "seed-lexicon"
    seed_dir.mkdir()
    (seed_dir / "markers.tsv").write_text(SEED_LEXICON)
    root = tmp_path / "lexicons"
    common = ["--conf", str(REPO_ROOT / "conf" / "llm-local.yaml"),
              "--set", f"llm.models.0.base_url={llm_server.base_url}", "--set", f"llm.cache_dir={tmp_path / 'cache'}",
              "--version", "vtest", "--lexicon-root", str(root)]
    generate = ["lexicon-llm", "generate", *common, "--seed-lexicon", str(seed_dir), "--move", "address", "-n", "3"]
    label = ["lexicon-llm", "label", *common]

    assert main([*generate, "--summary-json", str(tmp_path / "gen.json")]) == 0
    folder = root / "vtest" / "candidates"
    candidates = read_rows(folder / "llm.tsv", CANDIDATE_COLUMNS)
    assert candidates, "the model proposed no usable marker"
    for row in candidates:
        assert row["move"] == "address" and row["source"] == "llm"
        assert clean_marker(row["marker"]) == (row["marker"], None)
        assert row["marker"] not in {"to remedy", "to answer this question"}
        assert json.loads(row["provenance"]) == {"model": "gemma-local", "models": ["gemma-local"], "prompt": GENERATE_PROMPT}
    summary = json.loads((tmp_path / "gen.json").read_text())
    assert summary["moves"]["address"]["requests"] == 1 and summary["usage"]["gemma-local"]["http_calls"] >= 1

    # Labelling reads every candidate source, e.g. a pattern-expansion file from the lexicon toolkit.
    write_rows(folder / "pattern.tsv", [{"marker": "to sidestep this issue", "move": "address", "source": "pattern",
                                        "provenance": "{}"}], CANDIDATE_COLUMNS)
    assert main([*label, "--summary-json", str(tmp_path / "label.json")]) == 0
    labels = read_rows(folder / "labels.tsv", LABEL_COLUMNS)
    expected = {(r["marker"], "address") for r in candidates} | {("to sidestep this issue", "address")}
    assert {(r["marker"], r["move"]) for r in labels} == expected
    assert all(r["label"] in LABELS and r["labeller"] == "gemma-local+label_marker.v1" for r in labels)
    assert Counter(r["label"] for r in labels).total() == len(expected)

    # A rerun of both steps is served from the cache: no HTTP call, same files.
    before = {p.name: p.read_text() for p in folder.glob("*.tsv")}
    assert main([*generate, "--summary-json", str(tmp_path / "gen2.json")]) == 0
    assert main([*label, "--summary-json", str(tmp_path / "label2.json")]) == 0
    for name in ("gen2.json", "label2.json"):
        usage = json.loads((tmp_path / name).read_text())["usage"]["gemma-local"]
        assert usage["http_calls"] == 0 and usage["cached"] == usage["requests"] > 0
    assert {p.name: p.read_text() for p in folder.glob("*.tsv")} == before
