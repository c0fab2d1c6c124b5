"""Opening spans, consecutive pairs and seeded pair samples on small hand-built sentence tables."""

from __future__ import annotations

import pytest

from ratio_spark.pipeline.pairs import consecutive_pairs
from ratio_spark.lexicon.curation.spans import opening_spans, sample_pairs_for_spans
from ratio_spark.core.text import normalize_text

COLUMNS = ["sentence_id", "paper_id", "pub_date", "section_idx", "section_heading", "para_idx", "sent_idx",
           "char_start", "char_end", "text", "norm_text", "norm_flag"]


def rows(paper: str, section: int, para: int, texts: list[str], flags: dict[int, str] | None = None) -> list[tuple]:
    """Sentence rows of one paragraph, normalised like the segment stage."""
    flags = flags or {}
    return [
        (f"{paper}:{section}:{para}:{i}", paper, None, section, "intro", para, i, 0, len(t), t,
         normalize_text(t), flags.get(i))
        for i, t in enumerate(texts)
    ]


def frame(spark, data: list[tuple]):
    schema = ("sentence_id string, paper_id string, pub_date date, section_idx int, section_heading string, "
              "para_idx int, sent_idx int, char_start int, char_end int, text string, norm_text string, "
              "norm_flag string")
    return spark.createDataFrame(data, schema)


@pytest.fixture(scope="module")
def sentences(spark):
    data = (
        rows("p1", 0, 0, [
            "Our model overfits.",
            "To address this issue, we apply dropout.",
            "However, it is slow.",
            "In Table 2, we show results.",
        ])
        + rows("p1", 0, 1, ["However , the baseline wins.", "We see no comma here."])
        + rows("p1", 1, 0, ["Results are mixed.", "To address this issue, we tune it."])
        + rows("p2", 0, 0, [
            "One two three four five six seven eight, too long to count.",
            "One two three four five six seven, exactly seven words.",
            "HOWEVER, a flagged sentence.",
        ], flags={2: "malformed_few_letters"})
    )
    return frame(spark, data)


def test_opening_spans_counts_clean_short_spans(sentences):
    counts = {r.span: r.occurrences for r in opening_spans(sentences).collect()}
    assert counts == {
        "to address this issue": 2,
        "however": 2,  # "However , ..." trims to the same span; the flagged "HOWEVER," is not counted
        "in table 2": 1,
        "one two three four five six seven": 1,  # seven words is allowed, eight is not
    }


def test_opening_spans_max_words_and_order(sentences):
    result = opening_spans(sentences, max_words=1).collect()
    assert [(r.span, r.occurrences) for r in result] == [("however", 2)]
    ordered = [r.occurrences for r in opening_spans(sentences).collect()]
    assert ordered == sorted(ordered, reverse=True)


def test_consecutive_pairs_stay_within_a_paragraph(sentences):
    pairs = consecutive_pairs(sentences)
    got = sorted((r.first_sentence_id, r.second_sentence_id) for r in pairs.collect())
    assert got == [
        ("p1:0:0:0", "p1:0:0:1"), ("p1:0:0:1", "p1:0:0:2"), ("p1:0:0:2", "p1:0:0:3"),
        ("p1:0:1:0", "p1:0:1:1"),
        ("p1:1:0:0", "p1:1:0:1"),
        ("p2:0:0:0", "p2:0:0:1"), ("p2:0:0:1", "p2:0:0:2"),
    ]
    first = pairs.where("second_sentence_id = 'p1:0:0:1'").first()
    assert first.first_text == "Our model overfits."
    assert first.second_norm_text == "to address this issue, we apply dropout."


def test_consecutive_pairs_skip_a_missing_sentence(spark):
    data = rows("p3", 0, 0, ["A.", "B.", "C."])
    del data[1]  # sentence 1 is missing: 0 and 2 are not consecutive
    assert consecutive_pairs(frame(spark, data)).count() == 0


@pytest.fixture(scope="module")
def many_pairs(spark):
    data = []
    for p in range(40):
        data += rows(f"q{p}", 0, 0, [f"Problem {p} is hard.", f"To address this issue, we do {p}."])
        data += rows(f"q{p}", 0, 1, [f"Claim {p}.", f"For example, case {p}."])
        data += rows(f"q{p}", 0, 2, [f"Claim {p}.", f"To address this issue and more, we do {p}."])
    return consecutive_pairs(frame(spark, data))


def test_sample_pairs_for_spans_k_per_span_and_exact_opening(spark, many_pairs):
    spans = spark.createDataFrame([("to address this issue",), ("for example",), ("never seen",)], "span string")
    sample = sample_pairs_for_spans(many_pairs, spans, k=5, seed=1).collect()
    by_span: dict[str, list] = {}
    for r in sample:
        by_span.setdefault(r.span, []).append(r)
    assert sorted(by_span) == ["for example", "to address this issue"]
    assert all(len(v) == 5 for v in by_span.values())
    # "to address this issue and more," opens with the span but not with the span and a comma.
    assert all(r.second_norm_text.startswith(r.span + ",") for r in sample)
    assert sorted(r.sample_rank for r in by_span["for example"]) == [1, 2, 3, 4, 5]


def test_sample_pairs_for_spans_is_reproducible_and_seeded(spark, many_pairs):
    spans = spark.createDataFrame([("to address this issue",)], "span string")

    def ids(seed, frame_):
        return [r.second_sentence_id for r in
                sample_pairs_for_spans(frame_, spans, k=8, seed=seed).orderBy("sample_rank").collect()]

    assert ids(7, many_pairs) == ids(7, many_pairs.repartition(3))
    assert ids(7, many_pairs) != ids(8, many_pairs)
