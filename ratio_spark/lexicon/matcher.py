"""Match lexicon markers at the start of sentences and cut query and gold text (the paper's B.1), in Python.

``PairCutter`` holds an Aho-Corasick automaton over every marker of a lexicon (pyahocorasick). It is
built once on the driver, broadcast, and applied to Arrow batches of candidate pairs by
``ratio_spark.pipeline.mine``; this module is plain Python so the rules can be read and tested line by line.

The rules, in order, for a consecutive pair (first sentence q, second sentence s), on normalised text:
1. A marker matches when its text opens s and ends at a word boundary (the next character is not a
   letter, digit, hyphen, apostrophe or underscore); with ``require_comma`` a comma must follow it
   (after optional spaces). An extendable connective matches its prefix plus up to
   ``max_extension_words`` words (tokens without spaces or commas) and then a comma; the matched
   marker is the prefix with its extension. Of several matching markers the longest matched text
   wins; on a tie, a listed marker beats an extension.
2. The gold (or distractor) sentence is the rest of s after the marker and its comma, with a leading
   list prefix ("(i)") or ordinal removed: an ordinal followed by a comma ("second, we"), or an
   -ly ordinal without one ("firstly we"); "second order features" is left alone.
3. The query is q with one leading discourse marker removed: any lexicon marker or ordinal followed by
   a comma ("however,", "first,", "in particular,").
4. A pair is dropped when either sentence was flagged malformed at segmentation, or the query or the
   gold is shorter than ``min_chars`` characters (for a distractor only the second sentence counts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import ahocorasick

from ratio_spark.lexicon.loader import Lexicon, Marker
from ratio_spark.core.text import LEADING_LIST_MARKER_PATTERN, trie_alternation

_NOT_A_BOUNDARY = re.compile(r"[\w\-'’]")
_COMMA = re.compile(r"\s*,\s*")
_LIST_PREFIX = re.compile(LEADING_LIST_MARKER_PATTERN)


def opening_regex(markers) -> str:
    """A Java (and Python) regex true when one of ``markers`` opens the text and ends at a word boundary.

    The markers are folded into a character trie, so the regex engine walks one path instead of trying
    every marker in turn. It is a superset of rule 1 (no comma or extension check; Java's ``\\w`` is
    ASCII-only, so a few non-boundaries pass): a cheap JVM filter before ``PairCutter.match`` decides.
    """
    return "^(?:" + trie_alternation(markers) + r")(?![\w\-'’])"


@dataclass(frozen=True)
class MarkerMatch:
    marker: Marker  # the lexicon entry
    text: str  # the matched marker text (with the extension for an extendable connective)
    rest_start: int  # where the sentence's content starts after the marker and its comma


class PairCutter:
    def __init__(self, lexicon: Lexicon, require_comma: bool = True, max_extension_words: int = 5, min_chars: int = 35):
        self.lexicon = lexicon
        self.require_comma = require_comma
        self.min_chars = min_chars
        self.markers = list(lexicon.markers)
        self.automaton = ahocorasick.Automaton()
        for index, marker in enumerate(self.markers):
            self.automaton.add_word(marker.text, index)
        self.automaton.make_automaton()
        self.longest = max(len(m.text) for m in self.markers)
        self._extension = re.compile(r"((?:\s+[^\s,]+){0,%d}?)\s*,\s*" % max_extension_words)
        ordinals = "|".join(map(re.escape, sorted(lexicon.ordinals, key=len, reverse=True)))
        ly_ordinals = "|".join(map(re.escape, sorted((o for o in lexicon.ordinals if o.endswith("ly")), key=len, reverse=True)))
        # Gold: "first, we" loses the ordinal, and so does an -ly adverb without a comma ("firstly we");
        # "second order features" keeps its words. Query: only "first, ...".
        self._ordinal = (
            re.compile(r"(?:(?:%s)\s*,|(?:%s)(?![\w\-'’]))\s*" % (ordinals, ly_ordinals or "(?!)")) if ordinals else None
        )
        self._ordinal_comma = re.compile(r"(?:%s)\s*,\s*" % ordinals) if ordinals else None

    def match(self, text: str) -> MarkerMatch | None:
        """The longest lexicon marker that opens ``text`` (rule 1), or None."""
        best: tuple[int, int, MarkerMatch] | None = None
        for end, index in self.automaton.iter(text[: self.longest + 1]):
            marker = self.markers[index]
            after = end + 1
            if after != len(marker.text):  # the marker must open the sentence
                continue
            if after < len(text) and _NOT_A_BOUNDARY.match(text, after):
                continue
            if marker.extendable:
                extension = self._extension.match(text, after)
                if not extension:
                    continue
                found = MarkerMatch(marker, text[: after + len(extension.group(1))], extension.end())
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

    def strip_query_marker(self, text: str) -> str:
        """Rule 3: one leading discourse marker (lexicon marker or ordinal) followed by a comma."""
        found = self.match(text)
        if found and found.rest_start < len(text):
            return text[found.rest_start:].strip()
        if self._ordinal_comma is not None:
            ordinal = self._ordinal_comma.match(text)
            if ordinal and ordinal.end() < len(text):
                return text[ordinal.end():].strip()
        return text


def cut_original(original: str | None, normalised_prefix: str) -> str | None:
    """The original text with the words of a removed normalised prefix cut off, or None if they don't align.

    The original keeps case, citations and spacing, so the prefix is found word by word,
    case-insensitively, after an optional list marker.
    """
    if original is None:
        return None
    pattern = _original_prefix_pattern(normalised_prefix)
    if pattern is None:
        return original.strip()
    found = pattern.match(original)
    return original[found.end():].strip() if found else None


@lru_cache(maxsize=8192)
def _original_prefix_pattern(normalised_prefix: str) -> re.Pattern | None:
    """The compiled pattern of ``cut_original``. Removed prefixes are markers, ordinals and list markers, a
    few thousand distinct strings on a whole corpus, so each is compiled once per worker."""
    words = normalised_prefix.replace(",", " ").split()
    if not words:
        return None
    pattern = r"\s*(?:%s)?" % LEADING_LIST_MARKER_PATTERN.lstrip("^") + r"[\s,]+".join(map(re.escape, words)) + r"\s*,?\s*"
    return re.compile(pattern, re.IGNORECASE)
