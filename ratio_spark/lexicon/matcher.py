"""Match lexicon markers at the start of sentences (the paper's B.1), and the cutting rules' patterns.

``PairCutter`` holds an Aho-Corasick automaton over every marker of a lexicon (pyahocorasick). It is
built once on the driver, broadcast, and applied to Arrow batches of candidate pairs by
``ratio_spark.pipeline.mine``: the one part of mining that runs in Python. The rules that follow a match
(cutting the gold, the query and the original texts, the drops) are Spark SQL expressions in
``ratio_spark.pipeline.mine``; their regular expressions are built here (``cut_patterns``), spelled for
Java or for Python's ``re`` from one definition, as the normalisation rules are (``core.text``).

The rules, in order, for a consecutive pair (first sentence q, second sentence s), on normalised text
(docs/mining.md lists them with their defaults):
1. A marker matches when its text opens s and ends at a word boundary (the next character is not a
   letter, digit, hyphen, apostrophe or underscore); with ``require_comma`` a comma must follow it
   (after optional spaces). An extendable connective matches its prefix plus up to
   ``max_extension_words`` words (tokens without spaces, commas or brackets) and then a comma; the
   matched marker is the prefix with its extension. Of several matching markers the longest matched
   text wins; on a tie, a listed marker beats an extension. When s opens with an ordinal and a comma
   ("first, to address this, ..."), a marker right after the ordinal wins over the ordinal's own entry.
2. The gold (or distractor) sentence is the rest of s after the marker and its comma (a run of commas
   left where normalisation removed a citation counts as one), with a leading list prefix ("(i)") or
   ordinal removed: an ordinal followed by a comma ("second, we"), or an -ly ordinal without one
   ("firstly we"); "second order features" is left alone, and so is "(3)," (a reference to example 3).
3. The query is q with one leading opening removed: a lexicon marker or ordinal followed by a comma
   ("however,", "first,", "in particular,"), or else any clause of at most ``query_clause_words`` words
   followed by a comma ("at times,", "in the rw dataset,").
4. Drops: a sentence flagged malformed at segmentation, a query or gold that contains a citation (one
   drop reason per pattern family), a query or gold shorter than ``min_chars`` characters (for a
   distractor only the second sentence counts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import ahocorasick

from ratio_spark.lexicon.loader import Lexicon, Marker
from ratio_spark.core.schema import DEFAULT_MAX_EXTENSION_WORDS
from ratio_spark.core.text import LEADING_LIST_MARKER_PATTERN, trie_alternation

# What continues a word after a marker (so the marker does not end there): Python's \w, a hyphen or an
# apostrophe. ``str.isalnum`` is exactly the non-underscore part of Python's Unicode \w.
_WORD_PUNCTUATION = "_-'’"
# Python's Unicode \w, spelled per engine (java.util.regex's \w is ASCII-only).
_WORD_CHARS = {"python": r"\w", "java": r"\p{L}\p{N}_"}
# Python's whitespace (str.isspace), for Spark's trim functions (much faster than a regex at the end of a text),
# and as a Java character class (Java's \s is ASCII-only): the original texts keep the readers' spacing.
SPACE_CHARACTERS = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
                    + "\u2028\u2029\u202f\u205f\u3000")
_JAVA_SPACE = "[" + "".join(f"\\u{ord(c):04x}" for c in SPACE_CHARACTERS) + "]"
# The comma after a marker or ordinal, with the empty commas normalisation leaves where it removed a
# citation ("for example, [12], and x" -> "for example, , and x"): the gold starts after all of them.
COMMA_RUN = r"\s*,[\s,]*"
_COMMA = re.compile(COMMA_RUN)
# A word of an extension or of a query's opening clause: no space, comma or bracket, so a cut never
# lands inside a parenthesis ("to address the sparseness problem (e.g., wordnet ...), they").
_WORD = r"[^\s,()\[\]]+"


def _alternation(words) -> str:
    """Literal ``words`` as a regex alternation, longest first (so "first of all" beats "first")."""
    return "|".join(map(re.escape, sorted(words, key=len, reverse=True)))


def opening_regex(markers, ordinals=()) -> str:
    """A Java (and Python) regex true when one of ``markers`` opens the text and ends at a word boundary,
    optionally after one of ``ordinals`` and a comma ("first, to address this").

    The markers are folded into a character trie, so the regex engine walks one path instead of trying
    every marker in turn. It is a superset of rule 1 (no comma or extension check; Java's ``\\w`` is
    ASCII-only, so a few non-boundaries pass): a cheap JVM filter before ``PairCutter.match`` decides.
    """
    ordinal = "(?:(?:%s)%s)?" % (_alternation(ordinals), COMMA_RUN) if ordinals else ""
    return "^" + ordinal + "(?:" + trie_alternation(markers) + r")(?![\w\-'’])"


@dataclass(frozen=True)
class CutPatterns:
    """The regular expressions of rules 2 and 3, each anchored at the start of the text it is matched on,
    spelled for one engine (``java``: Spark's ``regexp_extract``/``regexp_replace``; ``python``: ``re``).

    ``list_prefix``: a leading list prefix of the gold, unless a comma follows it ("(3), shows" refers to
    example 3); ``ordinal``: a leading ordinal of the gold with a comma, or an -ly ordinal without one
    (None: no ordinals); ``ordinal_comma``: an ordinal and its comma opening the query; ``opening_clause``:
    a query's opening clause of at most ``query_clause_words`` words and a comma followed by a space
    ("1,000" is a number), unless a discourse marker and its comma follow (the clause is then the subject:
    "this reorientation, however, ..."; None: the rule is off); ``leading_list``: a list marker opening an original
    text (matched case-insensitively); ``space``: one whitespace character as Python's ``str.isspace``
    reads it (the original texts are cut word by word across it)."""

    list_prefix: str
    ordinal: str | None
    ordinal_comma: str | None
    opening_clause: str | None
    leading_list: str
    space: str


def cut_patterns(lexicon: Lexicon, query_clause_words: int, engine: str = "java") -> CutPatterns:
    """The ``CutPatterns`` of a lexicon (its ordinals and markers), for ``engine`` (``java`` or ``python``)."""
    ordinals = lexicon.ordinals
    not_a_boundary = r"[%s\-'’]" % _WORD_CHARS[engine]
    alternation = _alternation(ordinals)
    ly_ordinals = _alternation(o for o in ordinals if o.endswith("ly"))
    # A clause followed by a parenthetical discourse marker and its comma is the sentence's subject, not an
    # opening: "this reorientation, however, can be harmful" keeps its words (issue 34).
    parenthetical = trie_alternation([*(m.text for m in lexicon.markers), *ordinals])
    return CutPatterns(
        list_prefix=LEADING_LIST_MARKER_PATTERN + r"(?!\s*,)",
        # "first, we" loses the ordinal, and so does an -ly adverb without a comma ("firstly we");
        # "second order features" keeps its words.
        ordinal=(r"^(?:(?:%s)\s*,|(?:%s)(?!%s))[\s,]*" % (alternation, ly_ordinals or "(?!)", not_a_boundary)
                 if ordinals else None),
        ordinal_comma=r"^(?:%s)%s" % (alternation, COMMA_RUN) if ordinals else None,
        opening_clause=(r"^(?:%s\s+){0,%d}%s\s*,(?=\s)(?!\s*(?:%s)\s*,)[\s,]*"
                        % (_WORD, query_clause_words - 1, _WORD, parenthetical)
                        if query_clause_words > 0 else None),
        leading_list=LEADING_LIST_MARKER_PATTERN,
        space=r"\s" if engine == "python" else _JAVA_SPACE,
    )


@dataclass(frozen=True)
class MarkerMatch:
    marker: Marker  # the lexicon entry
    text: str  # the matched marker text (with the extension for an extendable connective)
    rest_start: int  # where the sentence's content starts after the marker and its comma
    index: int = -1  # the entry's position in ``PairCutter.markers``


class PairCutter:
    """Rule 1 (the module docstring) for one lexicon: the automaton and the match; picklable, so it can be
    broadcast.

    The defaults are the lexicon tools' (``lexicon.curation``: extensions of up to five words, as the
    paper's lexicon collected them). Mining builds its cutter from the ``mining:`` configuration instead
    (``ratio_spark.pipeline.mine.pair_cutter``: three extension words).
    """

    def __init__(self, lexicon: Lexicon, require_comma: bool = True, max_extension_words: int = DEFAULT_MAX_EXTENSION_WORDS):
        self.lexicon = lexicon
        self.require_comma = require_comma
        self.markers = list(lexicon.markers)
        self.automaton = ahocorasick.Automaton()
        for index, marker in enumerate(self.markers):
            self.automaton.add_word(marker.text, index)
        self.automaton.make_automaton()
        self.longest = max(len(m.text) for m in self.markers)
        self._lengths = [len(m.text) for m in self.markers]
        self._extension = re.compile(r"((?:\s+%s){0,%d}?)%s" % (_WORD, max_extension_words, COMMA_RUN))
        ordinal_comma = cut_patterns(lexicon, 0, "python").ordinal_comma
        self._ordinal_comma = re.compile(ordinal_comma) if ordinal_comma else None

    def opening_regex(self) -> str:
        """``opening_regex`` of this cutter's markers and ordinals: the JVM pre-filter before ``match``."""
        return opening_regex((m.text for m in self.markers), self.lexicon.ordinals)

    def match(self, text: str) -> MarkerMatch | None:
        """The longest lexicon marker that opens ``text`` (rule 1), or None.

        After an opening ordinal and comma, a marker there wins ("first, to address this, we" is Address,
        not the "first" distractor): the ordinal only numbers the point the marker introduces.
        """
        if self._ordinal_comma is not None:
            ordinal = self._ordinal_comma.match(text)
            if ordinal is not None and (after_ordinal := self._match_at(text, ordinal.end())) is not None:
                return after_ordinal
        return self._match_at(text, 0)

    def _match_at(self, text: str, start: int) -> MarkerMatch | None:
        """The longest marker that starts at ``start`` in ``text`` (rule 1); its text is the marker alone."""
        best: tuple[tuple[int, int], MarkerMatch] | None = None
        lengths, size = self._lengths, len(text)
        for end, index in self.automaton.iter(text, start, start + self.longest + 1):
            after = end + 1
            if after - lengths[index] != start:  # the marker must start there
                continue
            if after < size and (text[after].isalnum() or text[after] in _WORD_PUNCTUATION):
                continue
            marker = self.markers[index]
            if marker.extendable:
                extension = self._extension.match(text, after)
                if not extension:
                    continue
                found = MarkerMatch(marker, text[start: after + len(extension.group(1))], extension.end(), index)
            else:
                comma = _COMMA.match(text, after)
                if comma is None and self.require_comma:
                    continue
                rest = comma.end() if comma else after + len(text[after:]) - len(text[after:].lstrip())
                found = MarkerMatch(marker, marker.text, rest, index)
            key = (len(found.text), 0 if marker.extendable else 1)
            if best is None or key > best[0]:
                best = (key, found)
        return best[1] if best else None
