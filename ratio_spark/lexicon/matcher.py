"""Match lexicon markers at the start of sentences and cut query and gold text (the paper's B.1), in Python.

``PairCutter`` holds an Aho-Corasick automaton over every marker of a lexicon (pyahocorasick). It is
built once on the driver, broadcast, and applied to Arrow batches of candidate pairs by
``ratio_spark.pipeline.mine``; this module is plain Python so the rules can be read and tested line by line.

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
4. Drops (``ratio_spark.pipeline.mine.cut_pair``): a sentence flagged malformed at segmentation, a query
   or gold that contains a citation (``citation_patterns``, one drop reason per pattern family), a query
   or gold shorter than ``min_chars`` characters (for a distractor only the second sentence counts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import ahocorasick

from ratio_spark.lexicon.loader import Lexicon, Marker
from ratio_spark.core.text import LEADING_LIST_MARKER_PATTERN, trie_alternation

_NOT_A_BOUNDARY = re.compile(r"[\w\-'’]")
# The comma after a marker or ordinal, with the empty commas normalisation leaves where it removed a
# citation ("for example, [12], and x" -> "for example, , and x"): the gold starts after all of them.
COMMA_RUN = r"\s*,[\s,]*"
_COMMA = re.compile(COMMA_RUN)
# A word of an extension or of a query's opening clause: no space, comma or bracket, so a cut never
# lands inside a parenthesis ("to address the sparseness problem (e.g., wordnet ...), they").
_WORD = r"[^\s,()\[\]]+"
# A list prefix at the start of the gold, unless a comma follows it: "(3), shows" refers to example 3.
_LIST_PREFIX = re.compile(LEADING_LIST_MARKER_PATTERN + r"(?!\s*,)")


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
class MarkerMatch:
    marker: Marker  # the lexicon entry
    text: str  # the matched marker text (with the extension for an extendable connective)
    rest_start: int  # where the sentence's content starts after the marker and its comma


class PairCutter:
    """The matching and cutting rules of one lexicon (module docstring); picklable, so it can be broadcast.

    The defaults are the lexicon tools' (``lexicon.curation``: extensions of up to five words, as the
    paper's lexicon collected them; no query or citation rule). Mining builds its cutter from the
    ``mining:`` configuration instead (``ratio_spark.pipeline.mine.pair_cutter``: three extension words,
    the opening-clause and citation rules on).
    """

    def __init__(self, lexicon: Lexicon, require_comma: bool = True, max_extension_words: int = 5, min_chars: int = 35,
                 query_clause_words: int = 0, citation_patterns: dict[str, str] | None = None):
        self.lexicon = lexicon
        self.require_comma = require_comma
        self.min_chars = min_chars
        self.markers = list(lexicon.markers)
        self.automaton = ahocorasick.Automaton()
        for index, marker in enumerate(self.markers):
            self.automaton.add_word(marker.text, index)
        self.automaton.make_automaton()
        self.longest = max(len(m.text) for m in self.markers)
        self._extension = re.compile(r"((?:\s+%s){0,%d}?)%s" % (_WORD, max_extension_words, COMMA_RUN))
        ordinals = _alternation(lexicon.ordinals)
        ly_ordinals = _alternation(o for o in lexicon.ordinals if o.endswith("ly"))
        # Gold: "first, we" loses the ordinal, and so does an -ly adverb without a comma ("firstly we");
        # "second order features" keeps its words. Query, and before a marker: only "first, ...".
        self._ordinal = (
            re.compile(r"(?:(?:%s)\s*,|(?:%s)(?![\w\-'’]))[\s,]*" % (ordinals, ly_ordinals or "(?!)")) if ordinals else None
        )
        self._ordinal_comma = re.compile(r"(?:%s)%s" % (ordinals, COMMA_RUN)) if ordinals else None
        # Query: an opening clause of at most N words and a comma followed by a space ("1,000" is a number).
        self._opening_clause = (
            re.compile(r"(?:%s\s+){0,%d}%s\s*,(?=\s)[\s,]*" % (_WORD, query_clause_words - 1, _WORD))
            if query_clause_words > 0 else None
        )
        self.citation_patterns = dict(citation_patterns or {})
        self._citations = [(reason, re.compile(pattern)) for reason, pattern in self.citation_patterns.items()]
        self._any_citation = (
            re.compile("|".join(f"(?:{pattern})" for pattern in self.citation_patterns.values())) if self._citations else None
        )

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
        best: tuple[int, int, MarkerMatch] | None = None
        for end, index in self.automaton.iter(text, start, start + self.longest + 1):
            marker = self.markers[index]
            after = end + 1
            if after - len(marker.text) != start:  # the marker must start there
                continue
            if after < len(text) and _NOT_A_BOUNDARY.match(text, after):
                continue
            if marker.extendable:
                extension = self._extension.match(text, after)
                if not extension:
                    continue
                found = MarkerMatch(marker, text[start: after + len(extension.group(1))], extension.end())
            else:
                comma = _COMMA.match(text, after)
                if comma is None and self.require_comma:
                    continue
                rest = comma.end() if comma else after + len(text[after:]) - len(text[after:].lstrip())
                found = MarkerMatch(marker, marker.text, rest)
            key = (len(found.text), 0 if marker.extendable else 1)
            if best is None or key > best[:2]:
                best = (*key, found)
        return best[2] if best else None

    def strip_ordinal(self, text: str) -> str:
        """Rule 2's prefix removal: "firstly, we ..." -> "we ...", "(i) we ..." -> "we ..."."""
        for _ in range(2):
            before = text
            text = _LIST_PREFIX.sub("", text, count=1)
            if self._ordinal is not None:
                ordinal = self._ordinal.match(text)
                if ordinal and ordinal.end() < len(text):
                    text = text[ordinal.end():]
            if text == before:
                break
        return text.strip()

    def strip_query_opening(self, text: str) -> str:
        """Rule 3: one leading discourse marker or ordinal followed by a comma, or else a short opening clause."""
        found = self.match(text)
        if found and found.rest_start < len(text):
            return text[found.rest_start:].strip()
        for opening in (self._ordinal_comma, self._opening_clause):
            cut = opening.match(text) if opening is not None else None
            if cut and cut.end() < len(text):
                return text[cut.end():].strip()
        return text

    def citation(self, *texts: str) -> str | None:
        """The first citation pattern family (its drop reason, in configuration order) found in any of ``texts``."""
        if self._any_citation is None or not any(self._any_citation.search(text) for text in texts):
            return None
        return next((reason for reason, pattern in self._citations if any(pattern.search(text) for text in texts)), None)


_LEADING_LIST = re.compile(LEADING_LIST_MARKER_PATTERN, re.IGNORECASE)  # the original keeps its case: "(B) On Friday"
_SPACES = re.compile(r"\s*")
_SEPARATORS = re.compile(r"[\s,]+")
_TAIL = re.compile(r"\s*,?\s*")


def cut_original(original: str | None, normalised_prefix: str) -> str | None:
    """The original text with the words of a removed normalised prefix cut off, or None if they don't align.

    The original keeps case, citations and spacing, so the prefix is found word by word,
    case-insensitively, after an optional list marker. Plain string comparisons, no regex per prefix:
    query openings are thousands of distinct clauses, and compiling a pattern for each cost more than
    all the matching.
    """
    if original is None:
        return None
    words = normalised_prefix.replace(",", " ").split()
    if not words:
        return original.strip()
    lead = _LEADING_LIST.match(original)
    for start in (lead.end(), 0) if lead else (0,):
        end = _words_end(original, _SPACES.match(original, start).end(), words)
        if end is not None:
            return original[end:].strip()
    return None


def _words_end(text: str, pos: int, words: list[str]) -> int | None:
    """Where ``words`` (lowercase) end in ``text`` from ``pos``, separated by spaces or commas, with one
    comma after them; None if the text does not spell them there."""
    for index, word in enumerate(words):
        if index:
            separator = _SEPARATORS.match(text, pos)
            if separator is None:
                return None
            pos = separator.end()
        if text[pos:pos + len(word)].lower() != word:
            return None
        pos += len(word)
    return _TAIL.match(text, pos).end()
