"""The segmentation benchmark (benchmarks/segmentation_quality.py): its scoring, and our segmenter's
quality on real ScisummNet papers (docs/segmentation.md)."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from conftest import REPO_ROOT
from prerequisites import missing
from ratio_spark.pipeline.settings import SegmentConfig

SCRIPT = REPO_ROOT / "benchmarks" / "segmentation_quality.py"
_spec = importlib.util.spec_from_file_location("segmentation_quality", SCRIPT)
sq = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sq)

SEGMENTATION_DOC = REPO_ROOT / "docs" / "segmentation.md"
# One regression figure per engine: "**Regression figure, engine rules.** ... **F1 = 0.9897**".
GUARD_LINE = r"\*\*Regression figure, engine {engine}\.\*\*[^*]*\*\*F1 = (\d\.\d+)\*\*"
TOLERANCE = 0.01
ENGINES = ["rules", "sparknlp"]


def documented_f1_20_papers(engine: str) -> float:
    """The F1 docs/segmentation.md states for the default SegmentConfig with ``engine`` on the first 20 papers: the
    one figure the regression guard below compares with."""
    pattern = GUARD_LINE.format(engine=engine)
    found = re.findall(pattern, SEGMENTATION_DOC.read_text())
    assert len(found) == 1, f"docs/segmentation.md must state its Regression figure once as {pattern!r}"
    return float(found[0])


def test_score_counts_hits_misses_and_false_alarms():
    reference = {"a": {10, 20, 30}}
    assert sq.score({"a": {10, 20, 30}}, reference)["f1"] == 1.0
    missed_one = sq.score({"a": {10, 20}}, reference)
    assert (missed_one["precision"], missed_one["recall"]) == (1.0, pytest.approx(2 / 3))
    one_spurious = sq.score({"a": {10, 15, 20, 30}}, reference)
    assert (one_spurious["precision"], one_spurious["recall"]) == (0.75, 1.0)
    assert one_spurious["f1"] == pytest.approx(2 * 0.75 / 1.75)
    shifted = sq.score({"a": {11, 21, 31}}, reference)  # off by one character is a miss and a false alarm
    assert (shifted["tp"], shifted["fp"], shifted["fn"]) == (0, 3, 3)
    assert shifted["f1"] == 0.0


def test_score_is_micro_averaged_over_sections():
    reference = {"a": {5}, "b": {3, 7, 9}}
    result = sq.score({"a": {5}}, reference)  # nothing predicted for b
    assert (result["tp"], result["fn"]) == (1, 3)
    assert result["recall"] == 0.25  # a macro average would say 0.5


def test_reference_text_and_boundaries():
    text, ends = sq.join_sentences(["First one.", "Second (Fig. 2) one!", "Last."])
    assert text == "First one. Second (Fig. 2) one! Last."
    assert ends == {10, 31}  # the end of the text is not a boundary
    # A segmenter's spans may keep trailing spaces; the boundary is where the sentence's text ends.
    assert sq.boundaries_from_spans(text, [(0, 11), (11, 32), (32, 37)]) == {10, 31}
    assert sq.clean_sentence("a &quot;voting\n  tagger&quot;") == 'a "voting tagger"'


def test_paper_sections_skip_title_and_unescape():
    xml = b"""<PAPER><S sid="0">The Title</S>
      <ABSTRACT><S sid="1">We tag.</S><S sid="2">It works.</S></ABSTRACT>
      <SECTION title="1 Intro"><S sid="3">A &amp;quot;voting tagger&amp;quot;.</S>
        <S sid="4">Shown in Fig.</S><S sid="5">1 below.</S></SECTION></PAPER>"""
    abstract, intro = sq.paper_sections("X00-1", xml)
    assert (abstract.key, abstract.text, abstract.boundaries) == ("X00-1:0", "We tag. It works.", {7})
    assert intro.text == 'A "voting tagger". Shown in Fig. 1 below.'
    assert intro.boundaries == {18, 32} and intro.doubtful == {32}  # the reference's "Fig. | 1" error
    assert intro.corrected == {18}


@pytest.fixture(scope="module")
def sections():
    if not sq.DEFAULT_ARCHIVE.exists():
        missing(f"ScisummNet archive not found: {sq.DEFAULT_ARCHIVE}")
    paper_ids, sections = sq.read_sections(sq.DEFAULT_ARCHIVE, limit=20)
    assert len(paper_ids) == 20
    return sections


@pytest.mark.parametrize("engine", ENGINES)
def test_segmenter_quality_on_20_real_papers(spark, sections, engine):
    run = sq.spark_segment(spark, sections, SegmentConfig(engine=engine))
    f1 = sq.score(run["predicted"], {s.key: s.boundaries for s in sections})["f1"]
    documented = documented_f1_20_papers(engine)
    assert abs(f1 - documented) <= TOLERANCE, (
        f"boundary F1 of engine {engine} on the first 20 papers is {f1:.4f}, docs/segmentation.md says "
        f"{documented:.4f}: a regression, or an improvement to measure and document")
    # Every masked period is restored and every sentence is exactly its span of the input.
    assert run["sentences_with_mask"] == 0
    assert run["sentences_not_verbatim"] == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_masking_restores_every_period(spark, engine):
    from ratio_spark.pipeline.segment import split_sentences

    text = (
        "As shown in Fig. 3 and Eq. (2) (cf. Sec. 4), Smith et al. (2019) and Jones et al., 2020 agree, "
        "e.g. on U.S. data, i.e. the usual. Results vary... A lot. . . for x = 1. . . n (see above.) "
        "He said “stop.” Then etc. The end."
    )
    frame = spark.createDataFrame([(1, text)], "id int, para_text string")
    rows = split_sentences(frame, SegmentConfig(engine=engine)).orderBy("sent_idx").collect()
    assert [r.text for r in rows] == [
        "As shown in Fig. 3 and Eq. (2) (cf. Sec. 4), Smith et al. (2019) and Jones et al., 2020 agree, "
        "e.g. on U.S. data, i.e. the usual.",
        "Results vary...",
        "A lot. . . for x = 1. . . n (see above.)",
        "He said “stop.”",
        "Then etc.",
        "The end.",
    ]
    for r in rows:
        assert not any("\ue000" <= ch <= "\uf8ff" for ch in r.text)  # no private-use character left (sparknlp's masks)
        assert not any(ch < " " for ch in r.text)  # no control character left (the rules engine's masks)
        assert r.text == text[r.char_start:r.char_end]
