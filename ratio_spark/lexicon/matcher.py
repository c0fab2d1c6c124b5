"""Match lexicon markers at the start of sentences (the paper's B.1), and the cutting rules' patterns.

``PairCutter`` holds an Aho-Corasick automaton over every marker of a lexicon (pyahocorasick). It is
built once on the driver, broadcast, and applied to Arrow batches of candidate pairs by
``ratio_spark.pipeline.mine``. ``PairRules`` applies the rules that follow a match (cutting the gold, the
query and the original texts, the drops) to the same pairs in the same pass, with Python's ``re``: ~13 µs a
pair, where the same rules as Spark SQL expressions took ~45 µs of CPU (issue 28, docs/performance.md).

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
from typing import NamedTuple

import ahocorasick
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ratio_spark.lexicon.loader import Lexicon, Marker
from ratio_spark.core.schema import DEFAULT_MAX_EXTENSION_WORDS, Reason
from ratio_spark.core.text import LEADING_LIST_MARKER_PATTERN, first_characters, python_strings, trie_alternation

# What continues a word after a marker (so the marker does not end there): Python's \w, a hyphen or an
# apostrophe. ``str.isalnum`` is exactly the non-underscore part of Python's Unicode \w.
_WORD_PUNCTUATION = "_-'’"
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


# How many of a marker's first characters ``PairCutter.may_open_column``'s coarse test looks for: on ACL's sentences
# 12 passes 5% more than ``may_open`` with lexicon v1 (8% with 18,613 markers) and keeps RE2 fast over the larger
# lexicon (every character: RE2 took ~8x as long over its 18,613 markers as over v1's 327, longer than Python's re).
COARSE_PREFIX = 12


@dataclass(frozen=True)
class CutPatterns:
    """The regular expressions of rules 2 and 3 (Python's ``re``), each anchored at the start of the text it is
    matched on.

    ``list_prefix``: a leading list prefix of the gold, unless a comma follows it ("(3), shows" refers to
    example 3); ``ordinal``: a leading ordinal of the gold with a comma, or an -ly ordinal without one
    (None: no ordinals); ``ordinal_comma``: an ordinal and its comma opening the query; ``opening_clause``:
    a query's opening clause of at most ``query_clause_words`` words and a comma followed by a space
    ("1,000" is a number), unless a discourse marker and its comma follow (the clause is then the subject:
    "this reorientation, however, ..."; None: the rule is off); ``leading_list``: a list marker opening an original
    text (matched case-insensitively)."""

    list_prefix: str
    ordinal: str | None
    ordinal_comma: str | None
    opening_clause: str | None
    leading_list: str


def cut_patterns(lexicon: Lexicon, query_clause_words: int) -> CutPatterns:
    """The ``CutPatterns`` of a lexicon (its ordinals and markers)."""
    ordinals = lexicon.ordinals
    not_a_boundary = r"[\w\-'’]"
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
    )


class MarkerMatch(NamedTuple):
    """One match of rule 1. (Named tuples: the pass makes one or two a pair, and a frozen dataclass costs ~4x as much
    to make: ~1 µs of the rules' ~15 µs a pair.)"""

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
        ordinal_comma = cut_patterns(lexicon, 0).ordinal_comma
        self._ordinal_comma = re.compile(ordinal_comma) if ordinal_comma else None
        self.opening = re.compile(self.opening_regex())
        coarse = "^(?:%s)" % trie_alternation({m.text[:COARSE_PREFIX] for m in self.markers} | set(lexicon.ordinals))
        try:
            pc.match_substring_regex(pa.array([""]), coarse)
            self._coarse: str | None = coarse
        except pa.ArrowInvalid:
            self._coarse = None

    def opening_regex(self) -> str:
        """``opening_regex`` of this cutter's markers and ordinals: the pre-filter before ``match``."""
        return opening_regex((m.text for m in self.markers), self.lexicon.ordinals)

    def may_open(self, texts: list[str | None]) -> list[bool]:
        """The pre-filter in Python: whether some marker may open each text (``opening_regex``; None: False).
        Python's ``re`` runs the trie of 18,613 markers about as fast as v1's (~0.3 µs a text), where Java's
        regex took ~7x as long over it as over v1's (docs/performance.md)."""
        opening = self.opening.match
        return [text is not None and opening(text) is not None for text in texts]

    def may_open_column(self, texts: pa.Array | pa.ChunkedArray) -> pa.Array:
        """``may_open`` over an Arrow string column, with the same answers, most texts never made Python strings.

        First a coarse test over the whole column in Arrow's C++ (RE2): does an ordinal or the first
        ``COARSE_PREFIX`` characters of a marker open the text (no boundary: it passes every text ``may_open``
        passes, and about a fifth of ACL's sentences); then ``may_open`` on the texts it passes. ~0.3 against
        ~0.55 µs a sentence in batches of 10,000, the strings' conversion included (docs/performance.md). Where RE2 cannot read the
        coarse regex (past its memory budget: ~100,000 markers with distinct 12-character prefixes), ``may_open``
        runs on every text."""
        if self._coarse is None:
            return pa.array(self.may_open(python_strings(texts)), pa.bool_())
        coarse = pc.fill_null(pc.match_substring_regex(texts, self._coarse), False)
        if isinstance(coarse, pa.ChunkedArray):
            coarse = coarse.combine_chunks()
        rows = np.flatnonzero(coarse.to_numpy(zero_copy_only=False))
        opens = np.zeros(len(texts), dtype=bool)
        opens[rows] = self.may_open(python_strings(texts.take(pa.array(rows, pa.int64()))))
        return pa.array(opens, pa.bool_())

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


# A lexicon entry's fields as mining writes them beside a matched pair (``marker_fields``).
MARKER_FIELDS = ("role", "move", "category", "marker_entry", "marker_source")


def marker_fields(marker: Marker) -> tuple:
    """``MARKER_FIELDS`` of one entry: its role, its label as a move or as a category (by its role), its text and
    its source."""
    return (marker.role, marker.label if marker.is_move else None, None if marker.is_move else marker.label,
            marker.text, marker.source)


_SPACES, _SEPARATORS, _TAIL = re.compile(r"\s*"), re.compile(r"[\s,]+"), re.compile(r"\s*,?\s*")


def _words_end(original: str, pos: int, words: list[str]) -> int | None:
    """Where ``words`` end in ``original`` read from ``pos``: each lowercased, separated by spaces or commas; None
    where they do not align."""
    for index, word in enumerate(words):
        if index:
            separator = _SEPARATORS.match(original, pos)
            if separator is None:
                return None
            pos = separator.end()
        if original[pos:pos + len(word)].lower() != word:
            return None
        pos += len(word)
    return pos


class CutPair(NamedTuple):
    """What rules 1-4 make of a pair: the match (rule 1), the cut texts (rules 2 and 3, each on the normalised
    text and on the original, None where the original's words do not align) and the drop reason (rule 4, None:
    kept)."""

    found: MarkerMatch
    query_cut: str
    query_cut_original: str | None
    gold_cut: str
    gold_cut_original: str | None
    drop_reason: str | None

    def fields(self) -> list:
        """The values mining writes for the pair: role, move, category, marker (the matched text), marker_entry,
        marker_source, then the cut texts and the drop reason (``mine.MATCHED_COLUMNS``' order)."""
        role, move, category, entry, source = marker_fields(self.found.marker)
        return [role, move, category, self.found.text, entry, source, self.query_cut, self.query_cut_original,
                self.gold_cut, self.gold_cut_original, self.drop_reason]


class PairRules:
    """Rules 1-4 (the module docstring) for one pair, in plain Python; picklable, so it can be broadcast.

    ``citations``: drop reason -> pattern (Python's ``re``), checked in order; ``min_chars``: the shortest
    query and gold kept."""

    def __init__(self, cutter: PairCutter, patterns: CutPatterns, citations: dict[str, str], min_chars: int):
        self.cutter, self.min_chars = cutter, min_chars
        self.list_prefix = re.compile(patterns.list_prefix)
        self.ordinal = re.compile(patterns.ordinal) if patterns.ordinal else None
        self.openings = [re.compile(p) for p in (patterns.ordinal_comma, patterns.opening_clause) if p]
        self.leading_list = re.compile(patterns.leading_list, re.IGNORECASE)
        # Searched family by family, in order (the first that matches is the reason): one search of all the
        # families joined cost more, 7.9 against 5.0 µs a pair (docs/performance.md, "Mining: how fast"). A text
        # holding none of the characters a family's matches open with is not searched for it.
        self.citations = [(reason, re.compile(pattern).search, first_characters(pattern))
                          for reason, pattern in citations.items()]

    def strip_gold(self, text: str) -> str:
        """Rule 2 on the rest of the second sentence after the marker: a list prefix and then an ordinal
        removed, twice (a second round only when the first removed something)."""
        for _ in range(2):
            before = text
            text = self.list_prefix.sub("", text, count=1)
            found = self.ordinal.match(text) if self.ordinal else None
            if found and found.end() < len(text):
                text = text[found.end():]
            if text == before:
                break
        return text.strip()

    def strip_query(self, text: str) -> str:
        """Rule 3: the first sentence after the marker that opens it, or else after an opening ordinal and its
        comma, or else after a short opening clause."""
        # The pre-filter's regex first: most queries open with no marker, and it says so in a fifth of the
        # matcher's time (it passes every text the matcher matches).
        found = self.cutter.match(text) if self.cutter.opening.match(text) else None
        if found and found.rest_start < len(text):
            return text[found.rest_start:].strip()
        for opening in self.openings:
            cut = opening.match(text)
            if cut and cut.end() < len(text):
                return text[cut.end():].strip()
        return text

    def citation(self, texts) -> str | None:
        """The drop reason of the first citation family found in one of ``texts``, or None."""
        for reason, search, opens_with in self.citations:
            for text in texts:
                if opens_with is None or (opens_with in text if len(opens_with) == 1
                                          else any(map(text.__contains__, opens_with))):
                    if search(text):
                        return reason
        return None

    def cut_original(self, original: str | None, prefix: str) -> str | None:
        """The original text without the words of the normalised ``prefix``: found one after the other,
        case-insensitively, separated by spaces or commas, after an optional list marker ("(1) For example,
        we") or else at the start, with one comma after them; None where they do not align. (The original
        keeps case, citations and spacing.)"""
        if original is None:
            return None
        words = prefix.replace(",", " ").split()
        if not words:
            return original.strip()
        lead = self.leading_list.match(original)
        spaced = " ".join(words)
        for start in (lead.end(), 0) if lead else (0,):
            pos = _SPACES.match(original, start).end()
            # Most originals separate the words by one space: one comparison then finds where they end, as
            # the word-by-word walk would (a character that lowercases to two makes the lengths differ).
            if original[pos:pos + len(spaced)].lower() == spaced:
                pos += len(spaced)
            elif (pos := _words_end(original, pos, words)) is None:
                continue
            return original[_TAIL.match(original, pos).end():].strip()
        return None

    def cut(self, query_norm: str | None, query_original: str | None, query_flag: str | None,
            second_norm: str | None, second_original: str | None, second_flag: str | None) -> CutPair | None:
        """One pair -> its ``CutPair``, or None when no marker opens the second sentence."""
        second = second_norm or ""
        found = self.cutter.match(second)
        if found is None:
            return None
        marker = found.marker
        gold = self.strip_gold(second[found.rest_start:])
        removed_from_second = second[: len(second) - len(gold)] if second.endswith(gold) else second[: found.rest_start]
        query_norm = query_norm or ""
        query = self.strip_query(query_norm)
        removed_from_query = query_norm[: len(query_norm) - len(query)] if query_norm.endswith(query) else ""
        texts = (query, gold) if marker.is_move else (gold,)
        drop = None
        if second_flag is not None or (marker.is_move and query_flag is not None):
            drop = Reason.MALFORMED_SENTENCE
        elif (cited := self.citation(texts)) is not None:
            drop = cited
        elif marker.is_move and len(query) < self.min_chars:
            drop = Reason.SHORT_QUERY
        elif len(gold) < self.min_chars:
            drop = Reason.SHORT_GOLD
        query_cut_original = self.cut_original(query_original, removed_from_query)
        return CutPair(found, query, query_original if query_cut_original is None else query_cut_original,
                       gold, self.cut_original(second_original, removed_from_second), drop)
