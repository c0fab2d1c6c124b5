"""The marker rules of ratio_spark.lexicon.matcher, line by line, and the Spark mining stage on hand-built sentences."""

from __future__ import annotations

import datetime as dt

import pytest

from ratio_spark.core.config import MiningConfig
from ratio_spark.lexicon.loader import load_lexicon
from ratio_spark.lexicon.matcher import PairCutter, cut_original, opening_regex
from ratio_spark.core.text import normalize_text

MARKERS = [
    ("to address this issue", "move", "address", "manual", "false"),
    ("to address", "move", "address", "extension", "true"),
    ("for example", "move", "specify", "manual", "false"),
    ("for example in", "move", "specify", "manual", "false"),
    ("in particular", "move", "specify", "manual", "false"),
    ("more generally", "move", "broaden", "manual", "false"),
    ("more generally speaking", "move", "broaden", "manual", "false"),
    ("however", "distractor", "contrast", "manual", "false"),
    ("similarly", "distractor", "similarity", "manual", "false"),
]


@pytest.fixture(scope="module")
def lexicon(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lexicons") / "toy-v1"
    folder.mkdir()
    rows = ["marker\trole\tlabel\tsource\textendable\tevidence"] + ["\t".join(m) + "\ttest" for m in MARKERS]
    (folder / "markers.tsv").write_text("\n".join(rows) + "\n")
    (folder / "ordinals.txt").write_text("first\nfirstly\nsecond\nsecondly\nfinally\n")
    return load_lexicon(folder)


@pytest.fixture(scope="module")
def cutter(lexicon):
    return PairCutter(lexicon, require_comma=True, max_extension_words=5, min_chars=35)


@pytest.mark.parametrize(
    "sentence, marker, entry, rest",
    [
        ("to address this issue, we apply dropout.", "to address this issue", "to address this issue", "we apply dropout."),
        # An extension of up to five words ending at a comma; a listed marker beats an equal extension.
        ("to address this potential bias, we reweight.", "to address this potential bias", "to address", "we reweight."),
        ("to address the bias of both models, we", "to address the bias of both models", "to address", "we"),
        # The longest marker wins.
        ("more generally speaking, this holds.", "more generally speaking", "more generally speaking", "this holds."),
        ("for example in, sic", "for example in", "for example in", "sic"),
        ("more generally , this holds.", "more generally", "more generally", "this holds."),
    ],
)
def test_markers_that_match(cutter, sentence, marker, entry, rest):
    found = cutter.match(sentence)
    assert found is not None
    assert (found.text, found.marker.text, sentence[found.rest_start:]) == (marker, entry, rest)


@pytest.mark.parametrize(
    "sentence",
    [
        "to address the problem of overfitting in deep neural networks we use dropout.",  # > 5 words, no comma
        "to address the bias of the two models, we reweight.",  # six words before the comma
        "for example we use dropout.",  # no comma after the marker
        "for example in parsing, trees are used.",  # "for example in" is not followed by its comma
        "for examples, we use dropout.",  # not at a word boundary
        "more generally-applicable methods, such as x.",  # hyphen continues the word
        "we note, for example, that x.",  # the marker must open the sentence
        "howeverr, x is y.",
    ],
)
def test_sentences_that_do_not_match(cutter, sentence):
    assert cutter.match(sentence) is None


def test_without_require_comma_a_word_boundary_is_enough(lexicon):
    loose = PairCutter(lexicon, require_comma=False)
    found = loose.match("for example we use dropout.")
    assert found.text == "for example" and "for example we use dropout."[found.rest_start:] == "we use dropout."


def test_gold_loses_ordinal_and_list_prefixes(cutter):
    assert cutter.strip_ordinal("firstly, we train a model.") == "we train a model."
    assert cutter.strip_ordinal("secondly we train a model.") == "we train a model."
    assert cutter.strip_ordinal("second, we train a model.") == "we train a model."
    assert cutter.strip_ordinal("second order features are used.") == "second order features are used."
    assert cutter.strip_ordinal("(i) we train a model.") == "we train a model."
    assert cutter.strip_ordinal("first-order logic is used.") == "first-order logic is used."
    assert cutter.strip_ordinal("finally") == "finally"  # nothing would be left


def test_query_loses_one_leading_discourse_marker(cutter):
    assert cutter.strip_query_marker("however, the model overfits on small data.") == "the model overfits on small data."
    assert cutter.strip_query_marker("first, we collect the data from the web.") == "we collect the data from the web."
    assert cutter.strip_query_marker("in particular models overfit.") == "in particular models overfit."


def test_original_text_is_cut_word_by_word():
    assert cut_original("To address this issue, we apply Dropout [3].", "to address this issue, ") == "we apply Dropout [3]."
    assert cut_original("(1) For example, we do X.", "for example, ") == "we do X."
    assert cut_original("Something else entirely.", "for example, ") is None


def _opening_cases(lexicon) -> list[str]:
    """Each marker of the real lexicon in the contexts that decide a match, plus near misses."""
    texts = []
    for marker in (m.text for m in lexicon.markers):
        texts += [f"{marker}, we do x.", f"{marker} , we do x.", f"{marker} we do x.", marker, f"{marker}s, we",
                  f"{marker}-based, we", f"{marker}'s, we", f"{marker}é, we", f"({marker}), we", f"x {marker}, we",
                  f"{marker} of the three, we", marker[:-1]]
    return texts


def test_opening_regex_keeps_every_sentence_the_cutter_matches():
    """The JVM pre-filter may pass non-matches but must never drop a match (checked on the real lexicon)."""
    import re

    for version in ("v1", "v2"):
        lexicon = load_lexicon(version)
        pattern = re.compile(opening_regex(m.text for m in lexicon.markers))
        cutter = PairCutter(lexicon, require_comma=True)
        loose = PairCutter(lexicon, require_comma=False)
        texts = _opening_cases(lexicon)
        kept = {t for t in texts if pattern.search(t)}
        assert {t for t in texts if cutter.match(t) or loose.match(t)} <= kept
        # and it is a filter: near misses that no marker opens are dropped
        assert not any(pattern.search(t) for t in ("tomorrow, we", "x for example, we", "(for example), we"))
        assert len(kept) < len(texts) * 0.75


def test_opening_regex_means_the_same_in_the_jvm(spark):
    """Spark's rlike (java.util.regex) keeps exactly what Python's re keeps, for the real lexicon."""
    import re

    lexicon = load_lexicon("v2")
    regex = opening_regex(m.text for m in lexicon.markers)
    texts = _opening_cases(lexicon) + ["however’s, we", "in particular’ we", "to-date, we", "to_x", "to 3, we"]
    frame = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, text string")
    jvm = {row.i for row in frame.where(frame.text.rlike(regex)).select("i").collect()}
    # java.util.regex's \w is ASCII-only: Python's re.ASCII means the same; Python's Unicode \w rejects
    # more ("examplé"), which the cutter then rejects too.
    assert jvm == {i for i, t in enumerate(texts) if re.search(regex, t, re.ASCII)}
    assert {i for i, t in enumerate(texts) if re.search(regex, t)} < jvm


def _sentences(spark, paragraphs):
    """[(paper, date, [[sentence, ...] per paragraph])] -> a sentences DataFrame as segmentation writes it."""
    rows = []
    for paper_id, date, paras in paragraphs:
        for para_idx, sentences in enumerate(paras):
            for sent_idx, text in enumerate(sentences):
                rows.append((f"{paper_id}:0:{para_idx}:{sent_idx}", paper_id, date, 0, "Intro", para_idx, sent_idx,
                             0, len(text), text, normalize_text(text), None))
    schema = ("sentence_id string, paper_id string, pub_date date, section_idx int, section_heading string, "
              "para_idx int, sent_idx int, char_start int, char_end int, text string, norm_text string, norm_flag string")
    return spark.createDataFrame(rows, schema)


def test_mining_pairs_exactly_the_consecutive_sentences_of_a_paragraph(spark, lexicon):
    from ratio_spark.pipeline.mine import mine_pairs, pairs_for_mining

    problem = "Our model is prone to overfitting on the small training sets we have."
    sentences = _sentences(spark, [
        ("P1", dt.date(2016, 5, 1), [
            ["We study parsing of long scientific documents with neural models.", problem,
             "To address this issue, we apply dropout to every layer of the network."],
            # Paragraph boundary: this marker sentence has no previous sentence in its paragraph.
            ["For example, this sentence opens a paragraph and has no query before it."],
        ]),
        ("P2", dt.date(2017, 5, 1), [
            ["However, the earlier parsers were trained on news text only, not on papers.",
             "For example, the Penn Treebank contains Wall Street Journal articles only.",
             "Similarly, most dependency treebanks are built from newspaper text as well.",
             "For example, short."],
        ]),
    ])
    assert pairs_for_mining(sentences).count() == 2 + 3
    mining = mine_pairs(spark, sentences, lexicon, MiningConfig(lexicon="unused"))
    rows = {r.gold_sentence_id: r for r in mining.mined.collect()}
    assert set(rows) == {"P1:0:0:2", "P2:0:0:1", "P2:0:0:2"}
    address = rows["P1:0:0:2"]
    assert (address.role, address.move, address.marker) == ("move", "address", "to address this issue")
    assert address.query_text == normalize_text(problem)
    assert address.gold_text == "we apply dropout to every layer of the network."
    assert address.gold_text_original == "we apply dropout to every layer of the network."
    assert address.context_text == normalize_text("We study parsing of long scientific documents with neural models.")
    specify = rows["P2:0:0:1"]
    assert specify.query_text == "the earlier parsers were trained on news text only, not on papers."  # "however," removed
    assert specify.query_text_original == "the earlier parsers were trained on news text only, not on papers."
    assert specify.gold_text_original == "the Penn Treebank contains Wall Street Journal articles only."
    distractor = rows["P2:0:0:2"]
    assert (distractor.role, distractor.move, distractor.category) == ("distractor", None, "similarity")
    assert distractor.gold_text == "most dependency treebanks are built from newspaper text as well."
    drops = {r.gold_sentence_id: r.drop_reason for r in mining.matched.collect() if r.drop_reason}
    assert drops == {"P2:0:0:3": "short_gold"}
    assert [(r.reason, r.text) for r in mining.drops.collect()] == [("short_gold", "short.")]
    assert len({r.pair_id for r in rows.values()}) == 3
