"""Text cleaning shared by every stage: PDF de-hyphenation and the paper's normalisation (appendix B.1).

The normalisation rules are data (regex, replacement) so that the same rules run in the JVM over
Spark columns (``normalize_column``) and in plain Python (``normalize_text``) for lexicons and tests.
The regexes use only syntax that Java and Python read alike.
"""

from __future__ import annotations

import re

from pyspark.sql import Column
from pyspark.sql import functions as F

# GROBID keeps line-break hyphens: "how- ever", "en- sembles". A hyphen followed by a space between
# two lowercase letters is joined, except before words that follow a real suspended hyphen
# ("pre- and post-processing", "first- or second-order").
DEHYPHENATE_PATTERN = r"(?<=[a-z])- (?!(?:and|or|to|nor|vs|versus|as well as)\b)(?=[a-z])"

# Characters that are never content: C0/C1 controls, U+FFFD (undecodable), private use, zero-width.
INVALID_CHARS_PATTERN = r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\uFFFD\uE000-\uF8FF\u200B-\u200D\u2060\uFEFF]"

# Stray list markers at the start of a sentence: [12], (3), 3), a), (iv), iv., 3., •, -.
LEADING_LIST_MARKER_PATTERN = (
    r"^\s*(?:(?:\[\d+[a-z]?\]|\(\d+[a-z]?\)|\d+[a-z]?\)|\([a-z]\)|[a-z]\)|\((?:i|ii|iii|iv|v|vi|vii|viii|ix|x)\)"
    r"|(?:i|ii|iii|iv|v|vi|vii|viii|ix|x)\)|\d{1,2}(?:\.\d{1,2})*\.(?=\s)|[\u2022\u2023\u25CF\u25AA\u2219*-](?=\s))\s*)+"
)
# Bracketed numeric citations anywhere: [12], [3, 4], [5-7].
BRACKETED_NUMBERS_PATTERN = r"\s*\[\d+(?:\s*[,\u2013-]\s*\d+)*\]"

# Java's \s is ASCII-only while Python's is Unicode: spell out the Unicode spaces so both agree.
WHITESPACE_PATTERN = r"[\s\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]+"

# (pattern, replacement) applied in order after lowercasing.
NORMALIZATION_RULES: list[tuple[str, str]] = [
    (INVALID_CHARS_PATTERN, ""),
    # Typographic ligatures from PDFs.
    ("\uFB00", "ff"), ("\uFB01", "fi"), ("\uFB02", "fl"), ("\uFB03", "ffi"), ("\uFB04", "ffl"),
    (WHITESPACE_PATTERN, " "),
    (LEADING_LIST_MARKER_PATTERN, ""),
    (BRACKETED_NUMBERS_PATTERN, ""),
    (WHITESPACE_PATTERN, " "),
    (r"^ | $", ""),
]

_compiled_rules = [(re.compile(p), r) for p, r in NORMALIZATION_RULES]
_dehyphenate = re.compile(DEHYPHENATE_PATTERN)


def dehyphenate(text: str) -> str:
    """Join words that PDF line breaks split with a hyphen ("how- ever" -> "however")."""
    return _dehyphenate.sub("", text)


def normalize_text(text: str | None) -> str | None:
    """The paper's B.1 normalisation of one sentence, in Python (same rules as ``normalize_column``)."""
    if text is None:
        return None
    out = text.lower()
    for pattern, replacement in _compiled_rules:
        out = pattern.sub(replacement, out)
    return out


def normalize_column(column: Column) -> Column:
    """The paper's B.1 normalisation of a string column, in the JVM."""
    out = F.lower(column)
    for pattern, replacement in NORMALIZATION_RULES:
        out = F.regexp_replace(out, pattern, replacement)
    return out


def letters_ratio(text: str) -> float:
    if not text:
        return 0.0
    return sum(ch.isalpha() for ch in text) / len(text)
