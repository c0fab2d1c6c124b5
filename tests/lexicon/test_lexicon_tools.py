"""The lexicon toolkit's plain-Python half: file formats, pattern expansion with inflection, the build.

No Spark here (see test_lexicon_tools_spark.py). Inflection is the real pyinflect; the build writes
real lexicon folders and reads them back with ``load_lexicon``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ratio_spark.cli.main import main
from ratio_spark.lexicon.loader import SHIPPED_DIR, load_lexicon
from ratio_spark.lexicon.curation.build import LexiconBuildError, build_lexicon
from ratio_spark.lexicon.curation.formats import (
    Candidate,
    Decision,
    LexiconInputError,
    decisions_to_candidates,
    read_candidates,
    read_decisions,
    read_labels,
    write_candidates,
    write_decisions,
)
from ratio_spark.lexicon.curation.patterns import (
    DEFAULT_PATTERNS_DIR,
    Template,
    Term,
    expand_patterns,
    expand_template,
    parse_template,
    term_forms,
)
from ratio_spark.lexicon.curation.report import produced_by_source, read_provenance, table4


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- formats ---------------------------------------------------------------------------------------


def test_candidates_round_trip_keeps_provenance_readable(tmp_path):
    rows = [
        Candidate("to mitigate these risks", "address", "pattern", {"template": "t1", "fillers": {"response": "mitigate"}}),
        Candidate('"quoted" opener', "specify", "llm", {"model": "m", "note": 'says "hi"\tand tabs'}),
        Candidate("to mitigate these risks", "address", "pattern", {"template": "t2"}),  # duplicate: skipped
    ]
    path = tmp_path / "pattern.tsv"
    assert write_candidates(path, rows) == 2
    line = path.read_text().splitlines()[1]
    assert line == 'to mitigate these risks\taddress\tpattern\t{"fillers":{"response":"mitigate"},"template":"t1"}'
    back = read_candidates(path)
    assert [(c.marker, c.move, c.source) for c in back] == [(r.marker, r.move, r.source) for r in rows[:2]]
    assert back[0].provenance == rows[0].provenance
    assert back[1].provenance["note"] == 'says "hi"\tand tabs'


def test_candidates_from_another_writer_are_normalised_and_checked(tmp_path):
    path = write(tmp_path / "llm.tsv", "marker\tmove\tsource\tprovenance\n"
                 "To Mitigate This,\taddress\tgpt-x\t\"{\"\"round\"\": 1}\"\n"
                 "in short\tsummarise\tllm\t{}\n"
                 "a, b\tbroaden\tllm\t{}\n"
                 "fine\tbroaden\tllm\tnot json\n")
    with pytest.raises(LexiconInputError) as err:
        read_candidates(path)
    message = str(err.value)
    assert "3 problem(s)" in message
    assert "llm.tsv:3" in message and "summarise" in message
    assert "llm.tsv:4" in message and "comma" in message
    assert "llm.tsv:5" in message and "JSON" in message
    good = write(tmp_path / "llm.tsv", "marker\tmove\tsource\tprovenance\nTo Mitigate This,\taddress\tgpt-x\t\"{\"\"round\"\": 1}\"\n")
    (c,) = read_candidates(good)
    # the source column names a model: the file says which source it is
    assert (c.marker, c.source) == ("to mitigate this", "llm")
    assert c.provenance == {"round": 1, "source_detail": "gpt-x", "raw_marker": "To Mitigate This,"}


def test_labels_and_decisions_are_validated(tmp_path):
    labels = write(tmp_path / "labels.tsv", "marker\tmove\tlabel\tlabeller\treason\n"
                   "to fix this\taddress\tstrong-true\tm\tok\nx\taddress\tmaybe\tm\t\n")
    with pytest.raises(LexiconInputError, match="labels.tsv:3.*maybe"):
        read_labels(labels)
    decisions = write(tmp_path / "decisions.tsv", "span\tdecision\tlabel\tnote\n"
                      "for example\taccept\tspecify\t15/15\n"
                      "however\tdistractor\tcontrast\t\n"
                      "in table 2\treject\t\tfigure reference\n"
                      "in our case\t\t\t\n"
                      "for example\taccept\tspecify\trepeat is fine\n")
    got = read_decisions(decisions)
    assert [(d.span, d.decision, d.label) for d in got] == [
        ("for example", "accept", "specify"), ("however", "distractor", "contrast"),
        ("in table 2", "reject", ""), ("in our case", "", ""),
    ]
    assert [c.marker for c in decisions_to_candidates(got)] == ["for example"]
    bad = write(tmp_path / "bad.tsv", "span\tdecision\tlabel\tnote\n"
                "for example\taccept\tspecify\t\nfor example\tdistractor\tother\t\n"
                "similarly\taccept\tsimilarity\t\nhence\tdistractor\taddress\t\nthus\tmaybe\t\t\n")
    with pytest.raises(LexiconInputError) as err:
        read_decisions(bad)
    assert "4 problem(s)" in str(err.value)
    assert "decided distractor other here but accept specify" in str(err.value)


def test_write_decisions_keeps_extra_columns(tmp_path):
    path = tmp_path / "d.tsv"
    write_decisions(path, [Decision("for example", "accept", "specify", "15/15", {"rank": "2"})], ("rank",))
    (d,) = read_decisions(path)
    assert d.extra == {"rank": "2"} and d.note == "15/15"


# --- patterns --------------------------------------------------------------------------------------


def test_term_forms_inflect_with_pyinflect():
    verb = {text: form for text, form, _ in term_forms(Term("deal with", "verb"), ())}
    assert verb == {"deal with": "VB", "deals with": "VBZ", "dealt with": "VBD", "dealing with": "VBG"}  # VBN == VBD, kept once
    nouns = {text: number for text, _, number in term_forms(Term("data set", "noun"), ())}
    assert nouns == {"data set": "sg", "data sets": "pl"}
    assert [t for t, _, _ in term_forms(Term("analysis", "noun"), ("NNS",))] == ["analyses"]
    assert [t for t, _, _ in term_forms(Term("phenomenon", "noun"), ())] == ["phenomenon", "phenomena"]
    assert [t for t, _, _ in term_forms(Term("overfitting", "noun", "sg"), ())] == ["overfitting"]
    # pyinflect does not know it: regular rules
    assert [t for t, _, _ in term_forms(Term("trade-off", "noun"), ("NNS",))] == ["trade-offs"]
    assert [t for t, _, _ in term_forms(Term("solve", "verb", noun="solution"), ("noun", "VBG"))] == ["solution", "solving"]


def test_demonstratives_agree_in_number_with_the_noun():
    terms = {"response": [Term("mitigate", "verb")], "problem": [Term("risk", "noun")], "mod": [Term("potential", "adj")]}
    got = {c.marker for c in expand_template(Template("t", "address", "to [response:VB] [this] ([mod]) [problem]"), terms)}
    assert got == {
        "to mitigate this risk", "to mitigate that risk", "to mitigate these risks", "to mitigate those risks",
        "to mitigate this potential risk", "to mitigate that potential risk",
        "to mitigate these potential risks", "to mitigate those potential risks",
    }
    near = {c.marker for c in expand_template(Template("t", "address", "to [response:VB] [this:near] [problem]"), terms)}
    assert near == {"to mitigate this risk", "to mitigate these risks"}
    pronoun = {c.marker for c in expand_template(Template("t", "address", "to [response:VB] [this:sg]"), terms)}
    assert pronoun == {"to mitigate this", "to mitigate that"}


def test_template_syntax_alternatives_articles_and_provenance():
    terms = {"generalize": [Term("generalize", "verb"), Term("broaden", "verb")], "noun": [Term("observation", "noun")]}
    out = expand_template(Template("b1", "broaden", "{[generalize:VBG]|to [generalize:VB]} {beyond|from} [this] [noun]"), terms)
    markers = {c.marker for c in out}
    assert "generalizing from these observations" in markers and "to broaden beyond that observation" in markers
    assert len(markers) == 2 * 2 * 2 * 4
    one = next(c for c in out if c.marker == "generalizing from these observations")
    assert one.move == "broaden" and one.source == "pattern"
    assert one.provenance == {"template": "b1", "pattern": "{[generalize:VBG]|to [generalize:VB]} {beyond|from} [this] [noun]",
                              "fillers": {"generalize": "generalize", "this": "these", "noun": "observation"},
                              "forms": {"generalize": "VBG", "noun": "NNS"}}
    articles = {c.marker for c in expand_template(Template("s", "specify", "as [a] {concrete|illustrative} example"), {})}
    assert articles == {"as a concrete example", "as an illustrative example"}
    for bad in ("to [x", "to {a|b", "to (a", "to a)", "[this:many]", "[x:VBX]"):
        with pytest.raises(LexiconInputError):
            parse_template(bad)


def test_bundled_patterns_expand_to_the_papers_scale():
    """The shipped templates: every template parses, Broaden with the paper's two verbs is near its 810."""
    expansion = expand_patterns(DEFAULT_PATTERNS_DIR)
    assert set(expansion.by_move) == {"address", "broaden", "specify"}
    assert 5_000 < expansion.by_move["address"] < 30_000
    markers = {c.marker for c in expansion.candidates}
    for expected in ("to mitigate these risks", "to address this issue", "generalizing this observation",
                     "to generalize these findings", "more generally", "from a broader perspective", "as a concrete example"):
        assert expected in markers
    assert all("," not in m for m in markers)


# --- build -----------------------------------------------------------------------------------------

HEADER = "marker\tmove\tsource\tprovenance\n"


def candidates_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "candidates"
    for name, body in files.items():
        write(folder / name, body)
    return folder


def test_build_merges_sources_with_provenance_and_first_source_wins(tmp_path):
    folder = candidates_dir(tmp_path, {
        "spans.tsv": HEADER + "for example\tspecify\tmanual\t{}\nto avoid this problem\taddress\tmanual\t{}\n",
        "extension.tsv": HEADER + 'to address this issue\taddress\textension\t{"prefix":"to address","extension":"this issue","sentences":4,"pairs":3}\n'
                                  'to address\taddress\textension\t{"prefix":"to address","extension":"","sentences":1,"pairs":1}\n',
        "pattern.tsv": HEADER + 'to avoid this problem\taddress\tpattern\t{"template":"a1"}\n'
                                'to address these risks\taddress\tpattern\t{"template":"a1"}\n'
                                'generalizing this result\tbroaden\tpattern\t{"template":"b1","pattern":"[g:VBG] [this] [n]","fillers":{"g":"generalize"}}\n',
        "llm.tsv": HEADER + 'as a remedy\taddress\tllm:gpt\t{"model":"gpt"}\n',
    })
    decisions = write(tmp_path / "decisions.tsv", "span\tdecision\tlabel\tnote\nhowever\tdistractor\tcontrast\tcontrast, 15/15\n")
    result = build_lexicon(tmp_path / "v9", candidates_dir=folder, decisions_files=[decisions])
    lexicon = load_lexicon(tmp_path / "v9")  # the loader accepts the extra provenance column
    by_text = lexicon.by_text()
    assert by_text["to address"].extendable and by_text["to address"].source == "extension"
    assert "to address this issue" not in by_text  # an extension: the prefix matches it
    assert "to address these risks" not in by_text  # pattern output the prefix already covers
    assert by_text["to avoid this problem"].source == "manual"  # manual before pattern
    assert by_text["however"].role == "distractor" and by_text["however"].evidence == "contrast, 15/15"
    assert by_text["generalizing this result"].evidence.startswith("pattern b1: [g:VBG] [this] [n]")
    assert by_text["as a remedy"].source == "llm"
    rows = {r.split("\t")[0]: json.loads(r.split("\t")[6]) for r in (tmp_path / "v9" / "markers.tsv").read_text().splitlines()[1:]}
    assert rows["to avoid this problem"]["sources"] == ["manual", "pattern"]
    assert rows["to avoid this problem"]["pattern"] == {"template": "a1"}
    assert rows["to address"]["extension"]["extensions"] == 2  # attested openings, the bare prefix included
    summary = json.loads((tmp_path / "v9" / "build.json").read_text())
    assert summary["covered_by_extendable_prefix"] == 1
    assert "move:address:pattern" not in summary["markers_by_role_label_source"]
    assert result.summary["produced_by_role_label_source"]["move:address:pattern"] == 1
    produced = {p["source"]: p for p in produced_by_source(lexicon, read_provenance(tmp_path / "v9"), None)}
    assert (produced["pattern"]["produced"], produced["pattern"]["new"], produced["pattern"]["already_produced"]) == (2, 1, 1)
    assert (tmp_path / "v9" / "ordinals.txt").exists()


def test_build_reports_every_conflict_unless_a_decision_settles_it(tmp_path):
    folder = candidates_dir(tmp_path, {
        "spans.tsv": HEADER + "in particular\tspecify\tmanual\t{}\nmore generally\tbroaden\tmanual\t{}\n",
        "llm.tsv": HEADER + "in particular\tbroaden\tllm\t{}\nto this end\taddress\tllm\t{}\n",
        "extension.tsv": HEADER + '"to solve"\taddress\textension\t{"prefix":"to solve","extension":"","sentences":2}\n',
        "pattern.tsv": HEADER + "to solve this puzzle for readers now\tspecify\tpattern\t{}\n",
    })
    base = tmp_path / "base"
    write(base / "markers.tsv", "marker\trole\tlabel\tsource\textendable\tevidence\n"
          "to this end\tdistractor\tother\tmanual\tfalse\tpurpose\nfor example\tmove\tspecify\tmanual\tfalse\tx\n")
    with pytest.raises(LexiconBuildError) as err:  # by default, as mining: 3 words, so the pattern is no conflict
        build_lexicon(tmp_path / "bad", candidates_dir=folder, base=base)
    assert "2 conflict(s)" in str(err.value) and "covered by extendable prefix" not in str(err.value)
    with pytest.raises(LexiconBuildError) as err:
        build_lexicon(tmp_path / "bad", candidates_dir=folder, base=base, max_extension_words=5)
    message = str(err.value)
    assert "3 conflict(s)" in message
    assert "'in particular' is claimed as move:broaden from candidates:llm.tsv; move:specify from candidates:spans.tsv" in message
    assert "'to this end' is claimed as distractor:other from base:base; move:address from candidates:llm.tsv" in message
    assert "covered by extendable prefix 'to solve' (move:address)" in message
    assert not (tmp_path / "bad" / "markers.tsv").exists()
    decisions = write(tmp_path / "d.tsv", "span\tdecision\tlabel\tnote\n"
                      "in particular\taccept\tspecify\t15/15 specify\n"
                      "to this end\tdistractor\tother\tpurpose, not a problem\n"
                      "to solve this puzzle for readers now\treject\t\tnonsense\n")
    result = build_lexicon(tmp_path / "good", candidates_dir=folder, base=base, decisions_files=[decisions],
                           max_extension_words=5)
    by_text = load_lexicon(tmp_path / "good").by_text()
    assert by_text["in particular"].label == "specify"
    assert by_text["to this end"].role == "distractor"
    assert "to solve this puzzle for readers now" not in by_text
    assert result.summary["dropped"] == {"overridden_claims": 2, "rejected_by_decision": 1}


def test_labels_keep_only_strong_true_of_labelled_sources(tmp_path):
    folder = candidates_dir(tmp_path, {
        "llm.tsv": HEADER + "to fix this flaw\taddress\tllm\t{}\nto sort this out\taddress\tllm\t{}\n"
                            "in other words\tbroaden\tllm\t{}\nwidening the view\tbroaden\tllm\t{}\n",
        "pattern.tsv": HEADER + "to avoid these risks\taddress\tpattern\t{}\n",
        "labels.tsv": "marker\tmove\tlabel\tlabeller\treason\n"
                      "to fix this flaw\taddress\tstrong_true\tm1\tclear\n"
                      "to sort this out\taddress\tweak_true\tm1\tcontext\n"
                      "in other words\tbroaden\tfalse\tm1\trestatement\n",
    })
    result = build_lexicon(tmp_path / "v", candidates_dir=folder)
    markers = set(load_lexicon(tmp_path / "v").by_text())
    assert markers == {"to fix this flaw", "to avoid these risks"}  # pattern is not labelled: kept
    assert result.summary["labels"]["dropped"] == {"llm:false": 1, "llm:unlabelled": 1, "llm:weak_true": 1}


def test_require_decision_and_enumerated_extensions(tmp_path):
    folder = candidates_dir(tmp_path, {
        "pattern.tsv": HEADER + "to avoid these risks\taddress\tpattern\t{}\nto avoid that bias\taddress\tpattern\t{}\n",
        "extension.tsv": HEADER + 'to remedy this\taddress\textension\t{"prefix":"to remedy","extension":"this","sentences":3}\n'
                                  'to remedy the seed\taddress\textension\t{"prefix":"to remedy","extension":"the seed","sentences":1}\n',
    })
    decisions = write(tmp_path / "d.tsv", "span\tdecision\tlabel\tnote\nto avoid these risks\taccept\taddress\t3/3 read\n"
                      "to remedy the seed\treject\t\tnot a problem\n")
    result = build_lexicon(tmp_path / "v", candidates_dir=folder, decisions_files=[decisions],
                           require_decision=("pattern",), extensions="enumerate")
    by_text = load_lexicon(tmp_path / "v").by_text()
    assert set(by_text) == {"to avoid these risks", "to remedy this"}
    assert by_text["to avoid these risks"].source == "pattern"  # vetted, still credited to its source
    assert not by_text["to remedy this"].extendable
    assert result.summary["dropped"] == {"needs_decision": 1, "rejected_by_decision": 1}
    rows, _ = table4(load_lexicon(tmp_path / "v"), {"to remedy this": {"extension": {"prefix": "to remedy"}}}, None)
    assert {(r["source"], r["lexicon_markers"]) for r in rows if r["label"] == "address"} == {("extension", 1), ("pattern", 1), ("all", 2)}
    # prefix mode: the rejected extension is still matched by the prefix, and says so
    prefix_mode = build_lexicon(tmp_path / "p", candidates_dir=folder, decisions_files=[decisions], require_decision=("pattern",))
    assert prefix_mode.summary["rejected_extensions_still_matched_by_prefix"][0]["extension"] == "to remedy the seed"


def test_build_from_v1_as_base_keeps_v1(tmp_path):
    build_lexicon(tmp_path / "v1copy", base="v1")
    v1, copy = load_lexicon("v1"), load_lexicon(tmp_path / "v1copy")
    assert {(m.text, m.role, m.label, m.source, m.extendable, m.evidence) for m in v1.markers} == {
        (m.text, m.role, m.label, m.source, m.extendable, m.evidence) for m in copy.markers}
    assert copy.ordinals == v1.ordinals


def test_cli_patterns_accept_build(tmp_path, capsys):
    out = tmp_path / "candidates"
    assert main(["lexicon", "patterns", "--out", str(out / "pattern.tsv"), "--moves", "broaden", "--templates",
                 "broaden-gerund,broaden-adverb"]) == 0
    assert "candidates_written" in capsys.readouterr().out
    assert {c.move for c in read_candidates(out / "pattern.tsv")} == {"broaden"}
    decisions = write(tmp_path / "d.tsv", "span\tdecision\tlabel\tnote\nfor example\taccept\tspecify\t15/15\nhowever\tdistractor\tcontrast\t\n")
    assert main(["lexicon", "accept", "--decisions", str(decisions), "--out", str(out / "spans.tsv")]) == 0
    assert main(["lexicon", "build", "--out", str(tmp_path / "v7"), "--candidates", str(out), "--decisions", str(decisions),
                 "--summary-json", str(tmp_path / "b.json")]) == 0
    lexicon = load_lexicon(tmp_path / "v7")
    assert lexicon.by_text()["for example"].source == "manual" and lexicon.by_text()["more generally"].source == "pattern"
    assert json.loads((tmp_path / "b.json").read_text())["markers"] == len(lexicon.markers)
    assert main(["lexicon", "report", "--lexicon", str(tmp_path / "v7"), "--against", "none", "--out", str(tmp_path / "r")]) == 0
    table = (tmp_path / "r" / "table4.md").read_text()
    assert "| Pattern expansion | 0 | – | 126 | – | 0 | – | 126 | – |" in table
    assert "| Pattern expansion | 126 | 126 | 0 | 126 | – |" in table  # candidates, produced, credited elsewhere, new
    assert "| Manual curation | 1 | 1 | 0 | 1 | – |" in table
    # bad input: a clear message and exit code 2, no traceback
    capsys.readouterr()
    assert main(["lexicon", "build", "--out", str(tmp_path / "x"), "--candidates", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["lexicon", "patterns", "--out", str(tmp_path / "p.tsv"), "--templates", "nope"]) == 2
    assert "unknown template ids ['nope']" in capsys.readouterr().err


def test_default_lexicon_dir_has_patterns():
    assert (SHIPPED_DIR / "patterns" / "templates.tsv").exists()


def test_lexicon_v2_is_v1_plus_vetted_markers():
    """v2 as committed: it loads, keeps every v1 marker, and every marker it adds was read (a decision says so)."""
    v1, v2 = load_lexicon("v1"), load_lexicon("v2")
    assert {(m.text, m.role, m.label) for m in v1.markers} <= {(m.text, m.role, m.label) for m in v2.markers}
    provenance = read_provenance(SHIPPED_DIR / "v2")
    added = [m for m in v2.markers if m.text not in v1.by_text()]
    assert len(added) >= 100
    for m in added:
        assert "decision" in provenance[m.text], m.text
        assert m.evidence, m.text
    assert all("decision" in provenance[m.text] for m in v2.markers if m.source == "pattern")
    build = json.loads((SHIPPED_DIR / "v2" / "build.json").read_text())
    assert build["markers"] == len(v2.markers) and build["base"]["version"] == "v1"


def test_lexicon_v3_is_v2_plus_the_elife_review(tmp_path):
    """v3 as committed: v2's markers with two purpose distractors moved to Address by a decision, every added
    marker read (a decision says so), and the build reproduces it from its committed decisions."""
    v2, v3 = load_lexicon("v2"), load_lexicon("v3")
    moved = {"to test this hypothesis", "to test this"}
    assert {(m.text, m.role, m.label) for m in v2.markers if m.text not in moved} <= \
        {(m.text, m.role, m.label) for m in v3.markers}
    assert {(t, v3.by_text()[t].role, v3.by_text()[t].label) for t in moved} == {(t, "move", "address") for t in moved}
    provenance = read_provenance(SHIPPED_DIR / "v3")
    for m in v3.markers:
        if m.text not in v2.by_text() or m.text in moved:
            assert "decision" in provenance[m.text] and m.evidence, m.text
    assert "in mammals" not in v3.by_text()  # a near-miss: in neither lexicon
    out = tmp_path / "v3"
    assert main(["lexicon", "build", "--out", str(out), "--base", "v2", "--candidates", str(SHIPPED_DIR / "v3" / "candidates"),
                 "--decisions", str(SHIPPED_DIR / "v3" / "decisions" / "spans.tsv")]) == 0
    assert (out / "markers.tsv").read_text() == (SHIPPED_DIR / "v3" / "markers.tsv").read_text()
