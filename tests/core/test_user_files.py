"""Files people write by hand and hand to a command (prompts, CSVs, phrase lists): one that is not UTF-8, or
not a file, is one line naming it, as the reader's own error (a ``UserError``: exit 2), not a decoding trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratio_spark.core.errors import UserError
from ratio_spark.core.files import read_text

LATIN1 = "premi\xe8re ligne, caf\xe9\n".encode("latin-1")  # é and è as single bytes: not UTF-8


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _rerank_prompt(tmp_path: Path) -> None:
    from ratio_spark.rerank.prompts import load_prompt

    _write(tmp_path / "mine.md", LATIN1)
    load_prompt("mine", tmp_path)


def _silver_prompts(tmp_path: Path) -> None:
    from ratio_spark.silver.prompts import load_prompts

    _write(tmp_path / "address" / "mine.md", LATIN1)
    load_prompts(tmp_path)


def _lexicon_llm_prompt(tmp_path: Path) -> None:
    from ratio_spark.lexicon.curation.llm import load_prompt

    _write(tmp_path / "mine.v1.txt", LATIN1)
    load_prompt("mine.v1.txt", tmp_path)


def _annotators(tmp_path: Path) -> None:
    from ratio_spark.humaneval.assign import read_annotators

    read_annotators(str(_write(tmp_path / "annotators.csv", b"annotator\n" + LATIN1)))


def _subfields(tmp_path: Path) -> None:
    from ratio_spark.humaneval.assign import read_subfields

    read_subfields(_write(tmp_path / "subfields.csv", b"subfield,query_id\n" + LATIN1))


def _phrases(tmp_path: Path) -> None:
    from ratio_spark.cli.lexicon import _read_phrases

    _read_phrases(str(_write(tmp_path / "phrases.tsv", LATIN1)))


def _trec_run(tmp_path: Path) -> None:
    from ratio_spark.evaluation.runs import read_run_files

    read_run_files(_write(tmp_path / "bm25.trec", b"q1 Q0 c1 1 2.5 " + LATIN1))


def _silver_labels(tmp_path: Path) -> None:
    from ratio_spark.silver.agreement import load_labels

    load_labels(_write(tmp_path / "labels.csv", b"query_id,annotator,label\n" + LATIN1))


@pytest.mark.parametrize("reader", [_silver_labels, _trec_run, _rerank_prompt, _silver_prompts, _lexicon_llm_prompt, _annotators, _subfields, _phrases])
def test_a_file_that_is_not_utf8_is_one_line_naming_it(tmp_path, reader):
    with pytest.raises(UserError) as caught:
        reader(tmp_path)
    message = str(caught.value)
    assert "not UTF-8 text" in message and str(tmp_path) in message and "\n" not in message


def test_read_text_names_a_folder_and_reads_utf8(tmp_path):
    class Oops(UserError, ValueError):
        pass

    with pytest.raises(Oops, match=f"cannot read {tmp_path}"):
        read_text(tmp_path, Oops)
    assert read_text(_write(tmp_path / "ok.txt", "caf\xe9".encode()), Oops) == "caf\xe9"


def test_a_csv_saved_by_a_spreadsheet_with_a_byte_order_mark_reads(tmp_path):
    from ratio_spark.humaneval.assign import read_annotators

    people = read_annotators(str(_write(tmp_path / "annotators.csv", "\ufeffannotator\nalice\nbob\n".encode())))
    assert [p.name for p in people] == ["alice", "bob"]


def test_an_empty_labels_file_is_one_line(tmp_path):
    from ratio_spark.silver.agreement import LabelsError, load_labels

    with pytest.raises(LabelsError, match="not a labels CSV"):
        load_labels(_write(tmp_path / "labels.csv", b""))


def test_every_shipped_prompt_reads_through_the_one_loader():
    """core.prompts.read_prompt reads every prompt the package ships (both layouts), and no other module
    parses a prompt file itself (front matter or [system]/[user] sections)."""
    import ratio_spark
    from ratio_spark.core.prompts import read_prompt
    from ratio_spark.lexicon.loader import SHIPPED_DIR

    root = Path(ratio_spark.__file__).parent
    # the package's prompts, and the lexicons' (the top-level lexicons/prompts/, package data too)
    files = [p for folder in (root, SHIPPED_DIR) for p in folder.rglob("prompts/**/*") if p.suffix in (".md", ".txt")]
    assert {p.parent.name for p in files} >= {"prompts", "address"} and len(files) >= 20
    for path in files:
        prompt = read_prompt(path)
        assert prompt.system.strip() and len(prompt.sha256) == 64, path
        assert prompt.user is not None if path.suffix == ".txt" else prompt.meta.get("id") == prompt.id
    parsers = [p.relative_to(root).as_posix() for p in root.rglob("*.py")
               if any(s in p.read_text() for s in ('"[system]"', "yaml.safe_load(head)"))]
    assert parsers == ["core/prompts.py"]
