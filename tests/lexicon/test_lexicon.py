"""The lexicon loader's rules, and lexicon v1 itself (so a broken edit of the data fails the suite)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from ratio_spark.lexicon.loader import (
    COLUMNS,
    SHIPPED_DIR,
    DISTRACTOR_CATEGORIES,
    MOVES,
    LexiconError,
    load_lexicon,
    shipped_versions,
)
from ratio_spark.core.text import normalize_text
from ratio_spark.cli.main import main

V1 = SHIPPED_DIR / "v1"
GOOD_ROWS = [
    ("to address this issue", "move", "address", "manual", "false", "paper §4.1"),
    ("more generally", "move", "broaden", "manual", "false", "paper §4.1"),
    ("for example", "move", "specify", "manual", "false", "paper §4.1"),
    ("however", "distractor", "contrast", "manual", "false", "paper appendix A"),
]


def write_lexicon(folder: Path, rows: list[tuple], ordinals: str = "firstly\nsecond\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "markers.tsv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    (folder / "ordinals.txt").write_text(ordinals, encoding="utf-8")
    return folder


def v1_rows() -> list[dict]:
    with (V1 / "markers.tsv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


# --- the loader ---------------------------------------------------------------------------------


def test_a_valid_temp_lexicon_loads(tmp_path):
    lexicon = load_lexicon(write_lexicon(tmp_path / "ok", GOOD_ROWS))
    assert [m.text for m in lexicon.moves("address")] == ["to address this issue"]
    assert [m.text for m in lexicon.distractors()] == ["however"]
    assert lexicon.ordinals == ("firstly", "second")


@pytest.mark.parametrize(
    "bad_row, line, words",
    [
        # (a) one marker in two moves: the second occurrence (line 6) is named
        (("for example", "move", "broaden", "manual", "false", ""), 6, ["'for example'", "already listed", "specify"]),
        # (b) a marker that is both a move and a distractor
        (("more generally", "distractor", "other", "manual", "false", ""), 6, ["'more generally'", "already listed", "broaden"]),
        # (c) unnormalised markers: uppercase, trailing comma
        (("In Particular", "move", "specify", "manual", "false", ""), 6, ["not normalised", "'in particular'"]),
        (("in particular,", "move", "specify", "manual", "false", ""), 6, ["not normalised", "no comma"]),
        # (d) bad labels for a move and for a distractor, and a bad role
        (("as an example", "move", "specific", "manual", "false", ""), 6, ["move label 'specific'"]),
        (("in contrast", "distractor", "contrasting", "manual", "false", ""), 6, ["distractor category 'contrasting'"]),
        (("in contrast", "marker", "contrast", "manual", "false", ""), 6, ["role 'marker'"]),
    ],
)
def test_loader_rejects_a_bad_line_and_names_it(tmp_path, bad_row, line, words):
    folder = write_lexicon(tmp_path / "bad", GOOD_ROWS + [bad_row])
    with pytest.raises(LexiconError) as err:
        load_lexicon(folder)
    message = str(err.value)
    assert f"markers.tsv:{line}:" in message
    for word in words:
        assert word in message


def test_loader_rejects_an_unnormalised_ordinal(tmp_path):
    with pytest.raises(LexiconError, match=r"ordinals.txt:2: 'Secondly'"):
        load_lexicon(write_lexicon(tmp_path / "ord", GOOD_ROWS, ordinals="firstly\nSecondly\n"))


def test_loader_names_a_file_that_is_not_utf8(tmp_path):
    folder = write_lexicon(tmp_path / "latin1", GOOD_ROWS)
    (folder / "markers.tsv").write_bytes((folder / "markers.tsv").read_bytes().replace("§".encode(), "§".encode("latin-1")))
    with pytest.raises(LexiconError, match=r"markers.tsv: not UTF-8 text .*save it as UTF-8"):
        load_lexicon(folder)
    folder = write_lexicon(tmp_path / "ordinals", GOOD_ROWS)
    (folder / "ordinals.txt").write_bytes("premi\xe8rement\n".encode("latin-1"))
    with pytest.raises(LexiconError, match=r"ordinals.txt: not UTF-8 text"):
        load_lexicon(folder)


# --- where the shipped lexicons are ---------------------------------------------------------------


def test_from_the_source_tree_the_shipped_lexicons_are_the_top_level_folder():
    """One copy, beside jobs/ and conf/ (the design's layout); the suite imports the package from the source tree."""
    assert SHIPPED_DIR == REPO_ROOT / "lexicons"
    assert shipped_versions() == ["v1", "v2", "v3"]
    assert (SHIPPED_DIR / "prompts" / "moves.v1.yaml").is_file() and (SHIPPED_DIR / "patterns" / "templates.tsv").is_file()


def test_the_package_zip_carries_the_lexicons_where_the_loader_looks(tmp_path):
    """Imported from the zip alone (as spark-submit --py-files does), the package finds its lexicons inside it."""
    package_zip = tmp_path / "ratio_spark.zip"
    assert main(["zip", "--out", str(package_zip)]) == 0
    with zipfile.ZipFile(package_zip) as archive:
        names = archive.namelist()
    assert len(names) == len(set(names))
    zipped = {n.removeprefix("ratio_spark/lexicons/") for n in names if n.startswith("ratio_spark/lexicons/") and not n.endswith("/")}
    assert zipped == {p.relative_to(SHIPPED_DIR).as_posix() for p in SHIPPED_DIR.rglob("*") if p.is_file()}
    assert not any(n.startswith("lexicons/") or "__pycache__" in n for n in names)
    probe = ("import json, ratio_spark.lexicon.loader as L; "
             "print(json.dumps([str(L.SHIPPED_DIR), L.shipped_versions(), len(L.load_lexicon('v2').markers)]))")
    env = {**os.environ, "PYTHONPATH": str(package_zip)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    folder, versions, v2_markers = json.loads(done.stdout)
    assert folder.rstrip("/") == f"{package_zip}/ratio_spark/lexicons"  # a zipfile.Path: inside the zip
    assert versions == shipped_versions() and v2_markers == len(load_lexicon("v2").markers)


# --- lexicon v1 ------------------------------------------------------------------------------------


def test_v1_loads_with_all_moves_and_distractor_categories():
    lexicon = load_lexicon("v1")
    assert lexicon.version == "v1"
    for move in MOVES:
        assert lexicon.moves(move), f"v1 has no {move} markers"
    assert {m.label for m in lexicon.distractors()} <= set(DISTRACTOR_CATEGORIES)
    assert {"contrast", "similarity", "continuation", "inference"} <= {m.label for m in lexicon.distractors()}
    # Markers the paper names (§4.1, appendix A) and its two named distractors.
    by_text = lexicon.by_text()
    assert by_text["to address"].label == "address" and by_text["to address"].extendable
    assert by_text["more generally"].label == "broaden"
    assert by_text["for example"].label == "specify"
    assert by_text["in general"].role == "distractor" and by_text["therefore"].role == "distractor"
    assert "firstly" in lexicon.ordinals and "second" in lexicon.ordinals


def test_v1_file_markers_are_normalised_and_unique():
    rows = v1_rows()
    assert rows, "lexicons/v1/markers.tsv is empty"
    for line_no, row in enumerate(rows, start=2):
        text = row["marker"]
        assert text == text.strip() and text == normalize_text(text) and not text.endswith(","), f"line {line_no}: {text!r}"
        assert row["evidence"].strip(), f"line {line_no}: {text!r} has no evidence"
    texts = [r["marker"] for r in rows]
    assert len(texts) == len(set(texts)), "a marker is listed twice"


def test_v1_move_lexicons_are_disjoint_and_not_distractors():
    rows = v1_rows()
    by_move = {m: {r["marker"] for r in rows if r["role"] == "move" and r["label"] == m} for m in MOVES}
    distractors = {r["marker"] for r in rows if r["role"] == "distractor"}
    for i, a in enumerate(MOVES):
        for b in MOVES[i + 1:]:
            assert not by_move[a] & by_move[b], f"{a} and {b} share {by_move[a] & by_move[b]}"
        assert not by_move[a] & distractors, f"{a} markers also distractors: {by_move[a] & distractors}"


def test_v1_extendable_prefixes_do_not_swallow_other_labels():
    """An extendable prefix matches '<prefix> ... ,' (up to five more words): no marker of another
    move or a distractor may be such an extension, or one opening would match two labels."""
    lexicon = load_lexicon("v1")
    prefixes = [m for m in lexicon.markers if m.extendable]
    assert prefixes, "v1 has no extendable connectives"
    for prefix in prefixes:
        for other in lexicon.markers:
            extra = other.text[len(prefix.text) + 1:].split(" ")
            if other is not prefix and other.text.startswith(prefix.text + " ") and len(extra) <= 5:
                assert (other.role, other.label) == (prefix.role, prefix.label), (
                    f"{other.text!r} ({other.role} {other.label}) is an extension of {prefix.text!r} ({prefix.label})"
                )
