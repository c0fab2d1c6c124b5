"""The normalisation rules must give the same result in Python and in the JVM."""

from pyspark.sql import functions as F

from ratio_spark.core.text import dehyphenate, normalize_text
from ratio_spark.pipeline.normalize import normalize_column

CASES = {
    "[12] However, this is ﬁne.": "however, this is fine.",
    "1) First item here": "first item here",
    "(iv) a roman numeral item": "a roman numeral item",
    "3. Results are good": "results are good",
    "We use [3, 4] and [5-7] as references.": "we use and as references.",
    "  lots   of\twhite\u00a0space ": "lots of white space",
    "This is 3.5 times better (Smith et al., 2019).": "this is 3.5 times better (smith et al., 2019).",
    "• a bullet point": "a bullet point",
    "control\x07char and \ufffd replacement": "controlchar and replacement",
}


def test_python_normalisation():
    for raw, expected in CASES.items():
        assert normalize_text(raw) == expected, raw


def test_jvm_normalisation_matches_python(spark):
    df = spark.createDataFrame([(raw,) for raw in CASES], ["text"])
    got = {r["text"]: r["norm"] for r in df.select("text", normalize_column(F.col("text")).alias("norm")).collect()}
    for raw in CASES:
        assert got[raw] == normalize_text(raw), raw


def test_dehyphenation_joins_line_breaks_but_keeps_suspended_hyphens():
    assert dehyphenate("how- ever, en- sembles") == "however, ensembles"
    assert dehyphenate("pre- and post-processing, first- or second-order") == "pre- and post-processing, first- or second-order"
    assert dehyphenate("In con- trast, X- Y") == "In contrast, X- Y"


def test_trie_alternation_matches_exactly_the_words():
    import itertools
    import re

    from ratio_spark.lexicon.loader import load_lexicon
    from ratio_spark.core.text import trie_alternation
    from ratio_spark.pipeline.settings import SegmentConfig

    for words in ([a.strip(".") for a in SegmentConfig().abbreviations], [m.text for m in load_lexicon("v2").markers],
                  ["a", "ab", "abc", "b", "a.b"]):
        pattern = re.compile(f"(?:{trie_alternation(words)})")
        probes = set(words) | {w[:-1] for w in words} | {w + "s" for w in words} | {w.replace(".", "x") for w in words}
        probes |= {"".join(p) for p in itertools.product("ab.", repeat=3)}
        for probe in probes:
            assert bool(pattern.fullmatch(probe)) == (probe in words), probe
    # one branch per first character at the top: the engine tries a handful of branches, not every word
    assert trie_alternation(["fig", "figs", "eq", "eqs"]) == "(?:eq(?:s)?|fig(?:s)?)"


def test_collapse_whitespace_is_the_regex_it_replaced():
    """``collapse_whitespace`` splits with ``str.split`` (issue 28: ingest's parsers call it on every paragraph);
    on text with every whitespace character of Unicode, in runs, at both ends, it gives what ``\\s+`` gave."""
    import random
    import re
    import sys

    from ratio_spark.core.text import collapse_whitespace

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    near = ["\u200b", "\ufeff", "\u180e", "\x00", "-", "a", "é", "字"]  # not whitespace to Python
    rng = random.Random(7)
    texts = ["", " ", "a", *spaces, *(f"{s}a{s}{s}b{s}" for s in spaces)]
    texts += ["".join(rng.choice(spaces + near) for _ in range(rng.randrange(30))) for _ in range(2000)]
    for text in texts:
        assert collapse_whitespace(text) == re.sub(r"\s+", " ", text).strip(), repr(text)


def test_dehyphenate_without_a_hyphen_and_space_is_unchanged():
    assert dehyphenate("state-of-the-art, how -ever") == "state-of-the-art, how -ever"
    assert dehyphenate("how-\u00a0ever") == "how-\u00a0ever"  # only "- " is a PDF line break's hyphen


def test_python_strings_gives_what_to_pylist_gives():
    import pyarrow as pa

    from ratio_spark.core.text import python_strings

    for column in (pa.array(["For example, we", None, "", "é ∑"]), pa.chunked_array([["a", None], [], ["b"]]),
                   pa.array([], pa.string()), pa.array([None, None], pa.string())):
        assert python_strings(column) == column.to_pylist()


def test_first_characters_are_those_every_match_opens_with():
    """``first_characters`` names the characters every match of a regex opens with, or None where its literals
    cannot tell; a text with none of them never holds a match (checked on the citation families and others)."""
    import random
    import re

    from ratio_spark.core.text import first_characters
    from ratio_spark.pipeline.settings import CitationFilter

    families = CitationFilter()
    assert first_characters(families.et_al) == "("
    assert first_characters(families.brackets) == "["
    assert first_characters(families.placeholders) == "<[\\{"
    assert first_characters(r"\bx?(?:ab|c)") == "acx"
    assert first_characters(r"[a-c]z") == "abc"
    for unknown in (r"\w+", r"[^a]", r"a*", r"(?:x|)", r"(?i)\(x", r"(?=a)a", r"\s*\(", r".x", r"[a-z]x"):
        assert first_characters(unknown) is None, unknown
    patterns = [getattr(families, name) for name in ("et_al", "author_year", "brackets", "empty_brackets",
                                                      "placeholders", "formula_placeholders")]
    patterns += [r"\bx?(?:ab|c)", r"[a-c]z", r"(?:\{\{|<)cit"]
    alphabet = "abcxz ([{<]}>\\,.01 et al cite"
    texts = ["".join(random.Random(i).choices(alphabet, k=random.Random(-i).randint(0, 40))) for i in range(3000)]
    texts += ["(smith et al., 2019)", "(see smith, 2006a)", "[formula]", "{{math:3}}", "[\\cite=x]", "{{cite:k}}", "<cit id=3>", "[]", "[12]"]
    for pattern in patterns:
        starts, search = first_characters(pattern), re.compile(pattern).search
        matched = [text for text in texts if search(text)]
        assert matched, pattern  # the check below is not empty
        assert all(any(c in text for c in starts) for text in matched), pattern
