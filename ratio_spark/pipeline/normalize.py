"""The paper's B.1 normalisation over Spark columns (JVM) and over Arrow arrays (RE2): the rules of ``ratio_spark.core.text``.

``normalize_column`` runs the rules as Spark SQL expressions; ``normalize_array`` runs the same rules as RE2
regexes over a whole Arrow array (pyarrow.compute), for the rules segment engine's batches, where the JVM's ten
regex passes per sentence would cost more than the segmentation itself. Both give the same text: RE2 reads
the rules after ``re2_pattern`` (Java's ``\\s`` includes U+000B, RE2's does not; the rules' only lookahead is
rewritten). Arrow lowercases "İ" and "Σ" differently from Java, so ``normalize_array`` leaves null the few
texts holding them (8 of the 611,840 ACL sentences) and the caller fills them with ``normalize_column``.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

from ratio_spark.core.text import NORMALIZATION_RULES

# Java's full case mapping differs from Arrow's simple one for "İ" ("i̇" against "i") and for "Σ" (final sigma,
# "ς", in contexts Java decides): texts holding either are left to normalize_column.
_SPECIAL_CASING = "[\u0130\u03a3]"


def normalize_column(column: Column) -> Column:
    """The paper's B.1 normalisation of a string column, in the JVM."""
    out = F.lower(column)
    for kind, pattern, replacement in _JVM_RULES:
        if kind == "literal":
            out = F.replace(out, F.lit(pattern), F.lit(replacement))
        else:
            out = F.regexp_replace(out, pattern, replacement)
    return F.trim(out)  # Spark's trim strips only " ", as str.strip(" ") does


def re2_pattern(pattern: str) -> str:
    """A rule's Java/Python regex as RE2 reads it the same way.

    ``X(?=\\s)`` becomes ``X\\s``: in the rules it only ever ends an alternative that ``\\s*`` follows
    (``(?:...|X(?=\\s))\\s*``), where both match the same text. ``\\uXXXX`` becomes ``\\x{XXXX}``, and ``\\s``
    also matches U+000B, as Java's does."""
    out = pattern.replace(r"(?=\s)", r"\s")
    if re.search(r"\(\?(?:=|!|<=|<!)", out):
        raise ValueError(f"RE2 has no lookaround: {pattern!r}")
    out = re.sub(r"\\u([0-9A-Fa-f]{4})", r"\\x{\1}", out)
    pieces, in_class, i = [], False, 0
    while i < len(out):
        if out[i] == "\\":
            token = out[i:i + 2]
            pieces.append(("\\s\\x0B" if in_class else "[\\s\\x0B]") if token == "\\s" else token)
            i += 2
            continue
        if out[i] == "[" and not in_class:
            in_class = True
        elif out[i] == "]" and in_class and not out[i - 1] == "[":
            in_class = False
        pieces.append(out[i])
        i += 1
    return "".join(pieces)


def only_changing_runs(pattern: str, replacement: str) -> str:
    """``[ws]+`` -> " " as a pattern that skips the lone plain spaces it would replace by themselves.

    A replace pays per match, and a whitespace run is nearly always one " " between two words (measured: the
    rule took 6x the time of every other rule together). ``[ws]{2,}|[ws, no " "]`` gives the same text."""
    found = re.fullmatch(r"\[(.*)\]\+", pattern)
    if replacement != " " or found is None or not re.match(r"(?:\\s)", found.group(1)):
        return pattern
    others = found.group(1).replace("\\s", "\\t\\n\\x0B\\f\\r", 1)
    return f"[{found.group(1)}]{{2,}}|[{others}]"


_JVM_RULES = [(kind, only_changing_runs(p, r) if kind == "regex" else p, r) for kind, p, r in NORMALIZATION_RULES]
_RE2_RULES = [(kind, re2_pattern(p) if kind == "regex" else p, r) for kind, p, r in _JVM_RULES]


def normalize_array(texts: pa.Array) -> pa.Array:
    """The paper's B.1 normalisation of an Arrow string array, vectorised: the text ``normalize_column`` gives,
    or null for a text holding "İ" or "Σ" (see the module docstring), which the JVM must normalise."""
    out = pc.utf8_lower(texts)
    for kind, pattern, replacement in _RE2_RULES:
        if kind == "literal":
            out = pc.replace_substring(out, pattern, replacement)
        else:
            out = pc.replace_substring_regex(out, pattern, replacement)
    out = pc.utf8_trim(out, " ")
    return pc.if_else(pc.match_substring_regex(texts, _SPECIAL_CASING), pa.scalar(None, pa.string()), out)


def letter_counts(texts: pa.Array) -> np.ndarray:
    """The number of letters (``\\p{L}``) of each text of a lowercased string array, vectorised: the bytes a-z,
    plus RE2 over the non-ASCII characters alone (a regex pass pays per match: over the whole text, ~one per
    word)."""
    _, value_offsets, data = texts.buffers()
    offsets = np.frombuffer(value_offsets, dtype=np.int32)[texts.offset:texts.offset + len(texts) + 1].astype(np.int64)
    if data is None or offsets[-1] == offsets[0]:
        return np.zeros(len(texts), dtype=np.int64)
    raw = np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]]
    starts = offsets[:-1] - offsets[0]

    sizes = np.diff(offsets)

    def per_text(flags: np.ndarray) -> np.ndarray:  # the sum of flags over each text's bytes (empty texts: 0)
        sums = np.add.reduceat(flags, np.minimum(starts, len(flags) - 1), dtype=np.int32).astype(np.int64)
        return np.where(sizes > 0, sums, 0)

    counts = per_text((raw >= ord("a")) & (raw <= ord("z")))
    wide = np.flatnonzero(per_text(raw >= 0x80))
    if len(wide):  # plus the letters among their non-ASCII characters: few per text, so few matches per pass
        beyond_ascii = pc.replace_substring_regex(texts.take(pa.array(wide)), r"[\x00-\x7F]+", "")
        letters = pc.replace_substring_regex(beyond_ascii, r"[^\p{L}]+", "")
        counts[wide] += np.asarray(pc.utf8_length(letters), dtype=np.int64)
    return counts
