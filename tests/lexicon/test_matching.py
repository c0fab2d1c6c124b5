"""The marker rules of ratio_spark.lexicon.matcher, line by line, and the Spark mining stage on hand-built sentences."""

from __future__ import annotations

import datetime as dt

import pytest

from ratio_spark.lexicon.loader import LexiconError, load_lexicon
from ratio_spark.lexicon.matcher import PairCutter, opening_regex
from ratio_spark.core.text import normalize_text
from ratio_spark.pipeline.mine import citation_patterns, pair_cutter, pair_rules
from ratio_spark.pipeline.settings import MiningConfig

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
    ("first", "distractor", "continuation", "manual", "false"),  # also an ordinal, as in lexicon v1
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
    """The cutter mining builds from the default ``mining:`` configuration."""
    return pair_cutter(lexicon, MiningConfig())


CUT_FIELDS = ("role", "move", "category", "marker", "marker_entry", "marker_source",
              "query_cut", "query_cut_original", "gold_cut", "gold_cut_original", "drop_reason")


def cut_pairs(spark, lexicon, rows, config=None) -> list[list | None]:
    """Each (query, query original, query flag, second, second original, second flag) through mine's rules as
    the stage runs them (broadcast, over Arrow batches in the Python workers): the ``CUT_FIELDS`` values, or
    None where no marker opens the second sentence. One Spark job for all ``rows``."""
    from ratio_spark.pipeline.mine import cut_matched, pair_rules

    config = config or MiningConfig()
    schema = ("i int, query_norm string, query_original string, query_flag string, second_norm string, "
              "second_original string, second_flag string")
    frame = spark.createDataFrame([(i, *row) for i, row in enumerate(rows)], schema)
    by_row = {r["i"]: [r[f] for f in CUT_FIELDS] for r in cut_matched(frame, pair_rules(lexicon, config), spark).collect()}
    return [by_row.get(i) for i in range(len(rows))]


def cut_pair(spark, lexicon, query, query_original, query_flag, second, second_original, second_flag, config=None):
    """``cut_pairs`` of one pair."""
    return cut_pairs(spark, lexicon, [(query, query_original, query_flag, second, second_original, second_flag)], config)[0]


GOLD_PREFIX = "for example, "
A_GOLD = "for example, we apply dropout to every layer of the network."


def golds(spark, lexicon, rests, config=None) -> list[str]:
    """The gold cut of "for example, <rest>" for each rest (rule 2 on the rest)."""
    query = "our model is prone to overfitting on the small training sets."
    rows = [(query, query, None, GOLD_PREFIX + rest, GOLD_PREFIX + rest, None) for rest in rests]
    return [row[8] for row in cut_pairs(spark, lexicon, rows, config)]


def queries(spark, lexicon, texts, config=None) -> list[str]:
    """The query cut of each first sentence (rule 3), before "for example, we apply dropout ..."."""
    rows = [(text, text, None, A_GOLD, A_GOLD, None) for text in texts]
    return [row[6] for row in cut_pairs(spark, lexicon, rows, config)]


@pytest.mark.parametrize(
    "sentence, marker, entry, rest",
    [
        ("to address this issue, we apply dropout.", "to address this issue", "to address this issue", "we apply dropout."),
        # An extension of up to three words ending at a comma; a listed marker beats an equal extension.
        ("to address this potential bias, we reweight.", "to address this potential bias", "to address", "we reweight."),
        ("to address both biases, we", "to address both biases", "to address", "we"),
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
        "to address the problem of overfitting in deep neural networks we use dropout.",  # > 3 words, no comma
        "to address the bias of both models, we reweight.",  # five words before the comma (the default allows 3)
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


def test_the_pre_filter_keeps_every_sentence_a_marker_opens(cutter):
    """``may_open`` (the pass's pre-filter) keeps every sentence ``match`` matches, and drops a sentence no marker
    opens at a word boundary (a continuing letter, hyphen or non-ASCII letter) and a missing text."""
    opened = ["to address this issue, we use dropout.", "first, to address this, we use dropout.",
              "more generally, this holds.", "for example, [12], and x."]
    assert all(cutter.match(text) for text in opened)
    closed = ["howeverr, x is y.", "more generally-applicable methods, such as x.", "for exampleé, x.",
              "we note, for example, that x.", "", None]
    assert cutter.may_open(opened + closed) == [True] * len(opened) + [False] * len(closed)


def test_the_pre_filter_over_an_arrow_column_answers_as_may_open(lexicon, cutter):
    """``may_open_column`` (RE2's coarse test over the column, then ``may_open`` on what it passes) gives
    ``may_open``'s answers: on texts that open with a marker's first characters and stop there or go on, a
    non-ASCII boundary (RE2's classes are ASCII), an ordinal, nulls, a chunked column; and where RE2 cannot read
    the coarse regex, by ``may_open`` alone."""
    import pyarrow as pa

    texts = ["to address this issue, we use dropout.", "first, to address this, we use dropout.", "to addr",
             "to address", "to addressé, x", "more generally-applicable methods, such as x.", "for exampleé, x.",
             "firstly we", "second, more generally, x", "in particular, x", "in part, x", "howeverr, x is y.",
             "we note, for example, that x.", "", None, "however\u2009, x"]
    expected = cutter.may_open(texts)
    assert expected.count(True) >= 5 and expected.count(False) >= 5  # both answers are tried
    assert cutter.may_open_column(pa.array(texts, pa.string())).to_pylist() == expected
    chunked = pa.chunked_array([pa.array(texts[:7], pa.string()), pa.array(texts[7:], pa.string())])
    assert cutter.may_open_column(chunked).to_pylist() == expected
    assert cutter.may_open_column(pa.array([], pa.string())).to_pylist() == []
    assert cutter._coarse is not None  # the coarse test runs for this lexicon
    # RE2 reads whatever ``re.escape`` writes; it refuses a regex past its memory budget ("pattern too large": ~100,000
    # markers with distinct 12-character prefixes, ~10 s to build here), and the constructor then leaves no coarse test:
    refused = pair_cutter(lexicon, MiningConfig())
    refused._coarse = None
    assert refused.may_open_column(pa.array(texts, pa.string())).to_pylist() == expected


def test_max_extension_words_is_configurable(lexicon):
    sentence = "to address the bias of both models, we reweight."
    assert pair_cutter(lexicon, MiningConfig(max_extension_words=4)).match(sentence) is None
    found = pair_cutter(lexicon, MiningConfig(max_extension_words=5)).match(sentence)
    assert (found.text, sentence[found.rest_start:]) == ("to address the bias of both models", "we reweight.")


def test_an_extension_never_cuts_inside_a_parenthesis(lexicon, cutter):
    """Bug (issue 13): an extension word could hold an unmatched "(", so the gold started inside it."""
    sentence = "to address the sparseness problem (e.g., wordnet lacks relations), they used the web."
    for words in (3, 5, 8):
        assert pair_cutter(lexicon, MiningConfig(max_extension_words=words)).match(sentence) is None
    assert cutter.match("to address this (known) bias, we reweight the classes.") is None
    assert cutter.match("to address this bias (see above), we reweight the classes.") is None


def test_a_gold_never_starts_with_a_comma(spark, lexicon, cutter):
    """Bug (issue 13): where normalisation removed a citation ("for example, [12], and ..."), the gold kept
    the empty comma; the commas after a marker or an ordinal now count as one."""
    query = "contexts of a phrase help to translate it into the target language."
    original = "For example, [12], and Marton and Resnik (2008) used contexts."
    rows = [(query, query, None, second, original, None)
            for second in ("for example, , and marton and resnik (2008) used contexts.", normalize_text(original))]
    for row in cut_pairs(spark, lexicon, rows):
        assert (row[3], row[8]) == ("for example", "and marton and resnik (2008) used contexts.")
        assert row[9] == "[12], and Marton and Resnik (2008) used contexts."  # the original keeps its citation
    assert golds(spark, lexicon, ["second, , we train a model on the data."]) == ["we train a model on the data."]
    assert cutter.match("however , , the parser fails.").rest_start == len("however , , ")


def test_a_reference_to_an_example_is_not_a_list_number(spark, lexicon):
    """Bug (issue 13): "(3)," refers to example 3 and stays; "(3) we ..." is a list number and goes."""
    assert golds(spark, lexicon, [
        "(3), taken from the wsj, shows a long dependency.", "(3) , taken from the wsj, shows it.",
        "(3) we train a model.", "(i) (3), taken from the wsj.",
    ]) == ["(3), taken from the wsj, shows a long dependency.", "(3) , taken from the wsj, shows it.",
           "we train a model.", "(3), taken from the wsj."]
    query = "long dependencies are frequent in newspaper text as well."
    row = cut_pair(spark, lexicon, query, query, None, "for example, (3), taken from the wsj, shows a long dependency.",
                   "For example, (3), taken from the WSJ, shows a long dependency.", None)
    assert (row[8], row[9]) == ("(3), taken from the wsj, shows a long dependency.",
                                "(3), taken from the WSJ, shows a long dependency.")


def test_the_loader_rejects_a_marker_with_an_internal_comma(tmp_path):
    """A marker with a comma inside would match only where a second comma follows: the loader names it."""
    folder = tmp_path / "comma"
    folder.mkdir()
    rows = ["marker\trole\tlabel\tsource\textendable\tevidence", "for example\tmove\tspecify\tmanual\tfalse\tx",
            "in turn, for example\tmove\tspecify\tmanual\tfalse\tx"]
    (folder / "markers.tsv").write_text("\n".join(rows) + "\n")
    with pytest.raises(LexiconError) as err:
        load_lexicon(folder)
    assert "markers.tsv:3: marker 'in turn, for example' contains a comma" in str(err.value)


@pytest.mark.parametrize(
    "sentence, marker, rest",
    [
        # Issue 12 item 7: the ordinal numbers the point; the marker after it says what the point does.
        ("first, to address this issue, we apply dropout.", "to address this issue", "we apply dropout."),
        ("first , for example , we apply dropout.", "for example", "we apply dropout."),
        ("secondly, more generally, this holds.", "more generally", "this holds."),  # an ordinal but no entry
        ("first, however, the model overfits.", "however", "the model overfits."),  # a distractor after it
        # No marker after the ordinal: the ordinal's own entry, if it has one.
        ("first, we apply dropout.", "first", "we apply dropout."),
    ],
)
def test_a_marker_after_an_opening_ordinal_wins(cutter, sentence, marker, rest):
    import re

    found = cutter.match(sentence)
    assert (found.text, sentence[found.rest_start:]) == (marker, rest)
    assert re.search(cutter.opening_regex(), sentence)  # the JVM pre-filter keeps it
    # Only an ordinal followed by a comma is skipped.
    assert cutter.match("first to address this issue, we apply dropout.") is None
    assert cutter.match("secondly more generally, this holds.") is None


def test_without_require_comma_a_word_boundary_is_enough(lexicon):
    loose = PairCutter(lexicon, require_comma=False)
    found = loose.match("for example we use dropout.")
    assert found.text == "for example" and "for example we use dropout."[found.rest_start:] == "we use dropout."


def test_gold_loses_ordinal_and_list_prefixes(spark, lexicon):
    cases = {
        "firstly, we train a model.": "we train a model.",
        "secondly we train a model.": "we train a model.",
        "second, we train a model.": "we train a model.",
        "second order features are used.": "second order features are used.",
        "(i) we train a model.": "we train a model.",
        "first-order logic is used.": "first-order logic is used.",
        "finally": "finally",  # nothing would be left
    }
    assert dict(zip(cases, golds(spark, lexicon, list(cases)))) == cases


def test_query_loses_one_leading_discourse_marker(spark, lexicon):
    cases = {
        "however, the model overfits on small data.": "the model overfits on small data.",
        "first, we collect the data from the web.": "we collect the data from the web.",
        "in particular models overfit.": "in particular models overfit.",
        # A marker longer than the opening-clause limit still goes: to address + three words is five words.
        "to address this potential bias, we reweight.": "we reweight.",
        # Only one opening: the clause after a marker stays.
        "however, at times, the model overfits.": "at times, the model overfits.",
    }
    assert dict(zip(cases, queries(spark, lexicon, list(cases)))) == cases


def test_query_loses_a_short_opening_clause(spark, lexicon):
    cases = {
        # The released benchmark's rule: an opening clause of at most four words and a comma goes.
        "at times, the model overfits on small data.": "the model overfits on small data.",
        "to test this, we trained a second model.": "we trained a second model.",
        "in figure 5d, the curves cross twice.": "the curves cross twice.",
        "in the rw dataset, most words are rare.": "most words are rare.",
        "in the rw dataset , most words are rare.": "most words are rare.",
        # Kept: five words, a number with a thousands comma, a bracket, nothing after the comma.
        "in the rare words dataset, most words are rare.": "in the rare words dataset, most words are rare.",
        "1,000 sentences were annotated twice.": "1,000 sentences were annotated twice.",
        "(smith, 2019) showed that x is y.": "(smith, 2019) showed that x is y.",
        "as in (3), the verb moves.": "as in (3), the verb moves.",
        "at times,": "at times,",
        # A clause before a parenthetical marker and its comma is the subject (issue 34): kept whole.
        "this reorientation, however, can be harmful to the model.": "this reorientation, however, can be harmful to the model.",
        "our model, first, learns the lexicon from the data.": "our model, first, learns the lexicon from the data.",
        "in this paper, however, we study parsing of papers.": "in this paper, however, we study parsing of papers.",
        "these examples, albeit interesting, are rare in the data.": "albeit interesting, are rare in the data.",
    }
    assert dict(zip(cases, queries(spark, lexicon, list(cases)))) == cases


def test_the_opening_clause_rule_is_configurable(spark, lexicon):
    query = "to test this, we trained a second model."
    assert queries(spark, lexicon, [query], MiningConfig(query_opening_clause_words=0)) == [query]
    assert queries(spark, lexicon, [query], MiningConfig(query_opening_clause_words=2)) == [query]
    assert queries(spark, lexicon, [query], MiningConfig(query_opening_clause_words=3)) == ["we trained a second model."]


QUERY = "our model is prone to overfitting on the small training sets."
GOLD = "for example, we apply dropout to every layer of the network."


CITATION_CASES = {
    "as shown by (smith et al., 2019), x is y.": "citation_et_al",
    "as shown earlier (e.g., smith et al. 2019), x is y.": "citation_et_al",
    "as shown by (smith and jones, 2006), x is y.": "citation_author_year",
    "this holds for parsing (see smith, 2019) and tagging.": "citation_author_year",
    "this holds for parsing (smith, 2006a; lee, 2007) as well.": "citation_author_year",
    "this holds for parsing [3a] and for tagging as well.": "citation_brackets",
    "this holds for parsing [smith et al.] and for tagging.": "citation_brackets",
    "this holds for parsing [] and for tagging as well.": "citation_empty_brackets",
    # Placeholders of converted corpora, whatever the key (issue 34: keys without a digit slipped through).
    "as seen before (see [\\cite=nakayama], [\\cite=elmnp]).": "citation_placeholders",
    "this holds for parsing {{cite:smith}} and for tagging.": "citation_placeholders",
    "this holds for parsing <cit> and for tagging as well.": "citation_placeholders",
    "this holds for parsing \\cite{smith} and for tagging.": "citation_placeholders",
    "the loss is then [formula] for every training pair.": "citation_formula_placeholders",
    "the loss is then {{formula:3}} for every training pair.": "citation_formula_placeholders",
    # Not citations: a textual citation's bare year, a dataset's year, a section, an index.
    "smith et al. (2019) show that x is y on parsing.": None,
    "this holds on the semeval data (semeval 2007) as well.": None,
    "this holds for parsing (see section 3) and tagging.": None,
    "this holds for the weights w[i] and for the biases.": None,
}


def drop_reasons(spark, lexicon, texts, config=None) -> list[tuple[str | None, str | None]]:
    """The drop reason of each text as the query of a pair, and as the gold of one."""
    rows = [(text, text, None, GOLD, GOLD, None) for text in texts]
    rows += [(QUERY, QUERY, None, "for example, " + text, "For example, " + text, None) for text in texts]
    reasons = [row[10] for row in cut_pairs(spark, lexicon, rows, config)]
    return list(zip(reasons[:len(texts)], reasons[len(texts):]))


def test_the_citation_filter_drops_each_family_with_its_own_reason(spark, lexicon):
    got = dict(zip(CITATION_CASES, drop_reasons(spark, lexicon, list(CITATION_CASES))))
    assert got == {text: (reason, reason) for text, reason in CITATION_CASES.items()}


def test_the_citation_filter_is_configurable(spark, lexicon):
    assert list(citation_patterns(MiningConfig())) == [
        "citation_et_al", "citation_author_year", "citation_brackets", "citation_empty_brackets",
        "citation_placeholders", "citation_formula_placeholders"]
    text = "this holds for parsing (see smith et al., 2019) and for tagging [3a]."
    assert cut_pair(spark, lexicon, text, text, None, GOLD, GOLD, None)[10] == "citation_et_al"
    # A family turned off lets the next one decide; the whole filter turned off keeps the pair.
    no_et_al = MiningConfig(citation_filter={"et_al": None})
    assert cut_pair(spark, lexicon, text, text, None, GOLD, GOLD, None, no_et_al)[10] == "citation_brackets"
    off = MiningConfig(citation_filter={"enabled": False})
    assert cut_pair(spark, lexicon, text, text, None, GOLD, GOLD, None, off)[10] is None
    # A distractor's first sentence is not used, so its citations do not count.
    assert cut_pair(spark, lexicon, text, text, None, "however, " + QUERY, "However, " + QUERY, None)[10] is None


def test_original_text_is_cut_word_by_word(spark, lexicon):
    query = "our model is prone to overfitting on the small training sets."
    rows = [(query, query, None, "to address this issue, we apply dropout.", "To address this issue, we apply Dropout [3].", None),
            (query, query, None, "for example, we do x.", "(1) For example, we do X.", None),
            (query, query, None, "for example, we do x.", "Something else entirely.", None)]
    assert [row[9] for row in cut_pairs(spark, lexicon, rows)] == ["we apply Dropout [3].", "we do X.", None]
    # The query's opening clause, likewise.
    rows = [("on friday, bush called the senators of both parties.", "(B) On Friday, Bush called the senators of both parties.",
             None, A_GOLD, A_GOLD, None),
            ("at times, the model fails on long inputs.", "At  Times ,  the model fails on long inputs.", None, A_GOLD, A_GOLD, None),
            ("at times, the model fails on long inputs.", "Rarely, the model fails on long inputs.", None, A_GOLD, A_GOLD, None)]
    assert [row[7] for row in cut_pairs(spark, lexicon, rows)] == [
        "Bush called the senators of both parties.", "the model fails on long inputs.",
        "Rarely, the model fails on long inputs."]  # words that do not align: the whole original sentence


def _opening_cases(lexicon) -> list[str]:
    """Each marker of the real lexicon in the contexts that decide a match, plus near misses."""
    texts = []
    for marker in (m.text for m in lexicon.markers):
        texts += [f"{marker}, we do x.", f"{marker} , we do x.", f"{marker} we do x.", marker, f"{marker}s, we",
                  f"{marker}-based, we", f"{marker}'s, we", f"{marker}é, we", f"({marker}), we", f"x {marker}, we",
                  f"{marker} of the three, we", marker[:-1]]
    # After an opening ordinal and its comma(s) ("first, to address this, we"), and near misses of that.
    for ordinal in lexicon.ordinals:
        texts += [f"{ordinal}, for example, we", f"{ordinal} ,, for example, we", f"{ordinal} for example, we",
                  f"{ordinal}, x for example, we"]
    return texts


def test_opening_regex_keeps_every_sentence_the_cutter_matches():
    """The JVM pre-filter may pass non-matches but must never drop a match (checked on the real lexicon)."""
    import re

    for version in ("v1", "v2"):
        lexicon = load_lexicon(version)
        cutter = PairCutter(lexicon, require_comma=True)
        loose = PairCutter(lexicon, require_comma=False)
        pattern = re.compile(cutter.opening_regex())
        texts = _opening_cases(lexicon)
        kept = {t for t in texts if pattern.search(t)}
        matched = {t for t in texts if cutter.match(t) or loose.match(t)}
        assert matched <= kept
        assert {f"{o}, for example, we" for o in lexicon.ordinals} <= matched
        # and it is a filter: near misses that no marker opens are dropped
        assert not any(pattern.search(t) for t in ("tomorrow, we", "x for example, we", "(for example), we"))
        assert len(kept) < len(texts) * 0.75


def test_opening_regex_means_the_same_in_the_jvm(spark):
    """Spark's rlike (java.util.regex) keeps exactly what Python's re keeps, for the real lexicon."""
    import re

    lexicon = load_lexicon("v2")
    regex = opening_regex((m.text for m in lexicon.markers), lexicon.ordinals)
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


@pytest.mark.spark
def test_mining_applies_the_rules_in_spark(spark, lexicon):
    """The JVM pre-filter passes a marker after an ordinal that is no marker itself; the opening clause and
    the citation filter act in the Arrow batches, each citation family with its own drop reason."""
    from ratio_spark.pipeline.mine import mine_pairs

    sentences = _sentences(spark, [
        ("P3", dt.date(2018, 5, 1), [
            ["At times, the parser fails on long sentences with many clauses.",
             "Secondly, to address this issue, we split long sentences at their semicolons."],
            ["Parsers are trained on news text from one newspaper only.",
             "For example, the treebank of (Marcus et al., 1993) contains WSJ text."],
            ["Parsers are trained on news text from one newspaper, as in (Marcus and Santorini, 1993).",
             "For example, the Penn Treebank contains Wall Street Journal text only."],
        ]),
    ])
    mining = mine_pairs(spark, sentences, lexicon, MiningConfig(lexicon="unused"))
    rows = mining.mined.collect()
    assert len(rows) == 1
    address = rows[0]
    assert (address.move, address.marker, address.gold_sentence_id) == ("address", "to address this issue", "P3:0:0:1")
    assert address.query_text == address.query_text_original == "the parser fails on long sentences with many clauses."
    assert address.gold_text == address.gold_text_original == "we split long sentences at their semicolons."
    drops = {r.gold_sentence_id: r.drop_reason for r in mining.matched.collect() if r.drop_reason}
    assert drops == {"P3:0:1:1": "citation_et_al", "P3:0:2:1": "citation_author_year"}
    assert sorted(r.reason for r in mining.drops.collect()) == ["citation_author_year", "citation_et_al"]


def _generated_pairs(lexicon, count: int, seed: int = 7) -> list[tuple]:
    """``count`` pairs built from the real lexicon's markers and ordinals and the pieces every rule reads: list
    prefixes, comma runs, short clauses, numbers, citations of each family, brackets, flags, and originals that
    differ from the normalised text in case, spacing, a list marker, a citation or their words."""
    import random

    rng = random.Random(seed)
    markers = [m.text for m in lexicon.markers]
    ordinals = list(lexicon.ordinals)
    openings = ["", "", "", "(i) ", "(3), ", "(3) ", "1) ", "a. ", "(b) "] + [f"{o}, " for o in ordinals] + \
               [f"{o} " for o in ordinals] + [f"{o} ,, " for o in ordinals[:3]]
    clauses = ["", "", "at times, ", "to test this, ", "in figure 5d, ", "in the rw dataset , ", "in the rare words dataset, ",
               "1,000 ", "(smith, 2019) ", "as in (3), ", "this reorientation, however, ", "on friday, "]
    bodies = ["we apply dropout to every layer of the network.", "the model overfits on small data sets of papers.",
              "most words are rare in this corpus of scientific text.", "x.", "we use it.",
              "as shown by (smith et al., 2019), x is y on parsing.", "this holds for parsing (see smith, 2019) and tagging.",
              "this holds for parsing [3a] and for tagging as well.", "this holds for parsing [] and for tagging as well.",
              "this holds for the weights w[i] and for the biases too.", "second order features are used in every model.",
              "first-order logic is used by the parser in all runs.", "é accents and ümlauts stay in the text, always.",
              ", , and marton and resnik (2008) used contexts of phrases.", "as seen before (see [\\cite=nakayama]) here.",
              "the loss is then [formula] for every training pair.", ""]

    def original_of(norm: str) -> str | None:
        kind = rng.randrange(8)
        if kind == 0:
            return None
        if kind == 1:
            return norm.upper()
        if kind == 2:
            return "(1) " + norm.capitalize()
        if kind == 3:
            return norm.replace(" ", "  ", 2).replace(",", " ,", 1)
        if kind == 4:
            return "Something else entirely, we said."
        if kind == 5:
            return "\u00a0" + norm.title() + " [12]"
        return norm.capitalize()

    pairs = []
    for _ in range(count):
        marker = rng.choice(markers)
        comma = rng.choice([", ", " , ", ",, ", ", , ", " ", ","])
        extension = rng.choice(["", "", " this issue", " the sparseness problem (e.g.", " these three"])
        second = rng.choice(["", "", f"{rng.choice(ordinals)}, "]) + marker + extension + comma + rng.choice(openings) + rng.choice(bodies)
        query = rng.choice(["", rng.choice(markers) + ", "]) + rng.choice(clauses) + rng.choice(bodies)
        flag = lambda: rng.choice([None] * 9 + ["malformed"])
        pairs.append((query, original_of(query), flag(), second, original_of(second), flag()))
    return pairs


def test_the_stage_gives_the_rules_rows_on_many_pairs(spark):
    """The rules as the stage runs them (broadcast, over Arrow batches in the workers: nulls, several batches,
    the entry's fields taken by index) give, on thousands of pairs built from the real lexicon, every field of
    every pair as ``PairRules.cut`` called on the driver. (Before issue 28 moved them back into the pass, the
    rules ran as Spark SQL expressions; this test then held those against these Python rules.)"""
    config = MiningConfig()
    lexicon = load_lexicon(config.lexicon)
    rules = pair_rules(lexicon, config)
    pairs = _generated_pairs(lexicon, 4000)
    expected = [None if cut is None else cut.fields() for cut in map(lambda pair: rules.cut(*pair), pairs)]
    got = cut_pairs(spark, lexicon, pairs, config)
    assert sum(row is not None for row in expected) > 2000  # the pairs exercise the rules, not only the matcher
    assert {row[10] for row in expected if row} >= {None, "malformed_sentence", "short_gold", "short_query",
                                                    "citation_et_al", "citation_author_year", "citation_brackets",
                                                    "citation_empty_brackets", "citation_placeholders",
                                                    "citation_formula_placeholders"}
    differ = [(pair, want, have) for pair, want, have in zip(pairs, expected, got) if want != have]
    assert not differ, f"{len(differ)} of {len(pairs)} pairs differ, e.g. {differ[:3]}"
