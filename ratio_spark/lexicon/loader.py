"""Versioned marker lexicons: load, validate, describe.

A lexicon version is a folder under ``lexicons/`` (dolma-style: the folder name is the version):

    markers.tsv   one row per marker: marker, role, label, source, extendable, evidence
    ordinals.txt  ordinal and list openers removed from gold sentences ("firstly", "second", ...)
    README.md     how the version was built

``role`` is ``move`` (label address / broaden / specify) or ``distractor`` (label contrast /
similarity / continuation / inference / other). An ``extendable`` marker is a prefix ("to address")
whose extensions of up to five words ending at a comma all count as markers. Marker text is
normalised exactly as sentences are (``ratio_spark.core.text.normalize_text``), without the comma.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ratio_spark.core.text import normalize_text

MOVES = ("address", "broaden", "specify")
DISTRACTOR_CATEGORIES = ("contrast", "similarity", "continuation", "inference", "other")
SOURCES = ("manual", "extension", "llm", "pattern")
COLUMNS = ("marker", "role", "label", "source", "extendable", "evidence")
DEFAULT_LEXICON_DIR = Path(__file__).resolve().parents[2] / "lexicons"


class LexiconError(ValueError):
    """A lexicon file that breaks the rules; the message lists every problem with its line."""


@dataclass(frozen=True)
class Marker:
    text: str
    role: str  # move | distractor
    label: str  # a move, or a distractor category
    source: str
    extendable: bool
    evidence: str

    @property
    def is_move(self) -> bool:
        return self.role == "move"


@dataclass(frozen=True)
class Lexicon:
    version: str
    markers: tuple[Marker, ...]
    ordinals: tuple[str, ...]

    def moves(self, move: str) -> list[Marker]:
        return [m for m in self.markers if m.is_move and m.label == move]

    def distractors(self) -> list[Marker]:
        return [m for m in self.markers if not m.is_move]

    def by_text(self) -> dict[str, Marker]:
        return {m.text: m for m in self.markers}

    def table(self) -> list[dict]:
        """Markers by source and label (the shape of the paper's Table 4, lexicon side)."""
        counts = Counter((m.role, m.label, m.source) for m in self.markers)
        return [
            {"role": role, "label": label, "source": source, "markers": n}
            for (role, label, source), n in sorted(counts.items())
        ]


def _parse_bool(value: str) -> bool | None:
    return {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}.get(value.strip().lower())


def lexicon_folder(path: str | Path) -> Path:
    """A lexicon folder, or a version name under ``lexicons/``, as a folder path."""
    folder = Path(path)
    if not folder.exists() and not folder.is_absolute():
        folder = DEFAULT_LEXICON_DIR / str(path)
    return folder


def load_lexicon(path: str | Path) -> Lexicon:
    """Load and validate a lexicon folder (or a version name under ``lexicons/``)."""
    folder = lexicon_folder(path)
    markers_file = folder / "markers.tsv"
    if not markers_file.exists():
        raise LexiconError(f"no markers.tsv in lexicon folder {folder}")
    problems: list[str] = []
    markers: list[Marker] = []
    seen: dict[str, int] = {}
    with markers_file.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise LexiconError(f"{markers_file}: missing columns {missing}; expected {list(COLUMNS)}")
        for line_no, row in enumerate(reader, start=2):
            where = f"{markers_file.name}:{line_no}"
            text = (row["marker"] or "").strip()
            role, label, source = (row["role"] or "").strip(), (row["label"] or "").strip(), (row["source"] or "").strip()
            extendable = _parse_bool(row["extendable"] or "")
            if not text:
                problems.append(f"{where}: empty marker")
                continue
            if text.endswith(",") or normalize_text(text) != text:
                problems.append(
                    f"{where}: marker {text!r} is not normalised like sentences (expected {normalize_text(text).rstrip(',')!r}, no comma)"
                )
            if role not in ("move", "distractor"):
                problems.append(f"{where}: role {role!r} must be move or distractor")
            elif role == "move" and label not in MOVES:
                problems.append(f"{where}: move label {label!r} must be one of {MOVES}")
            elif role == "distractor" and label not in DISTRACTOR_CATEGORIES:
                problems.append(f"{where}: distractor category {label!r} must be one of {DISTRACTOR_CATEGORIES}")
            if source not in SOURCES:
                problems.append(f"{where}: source {source!r} must be one of {SOURCES}")
            if extendable is None:
                problems.append(f"{where}: extendable {row['extendable']!r} must be true or false")
            if text in seen:
                first = markers[seen[text]]
                problems.append(
                    f"{where}: marker {text!r} already listed as {first.role} {first.label}: "
                    "the move lexicons must be disjoint and no marker may also be a distractor"
                )
                continue
            seen[text] = len(markers)
            markers.append(Marker(text, role, label, source, bool(extendable), (row["evidence"] or "").strip()))
    ordinals_file = folder / "ordinals.txt"
    ordinals: list[str] = []
    if ordinals_file.exists():
        for line_no, line in enumerate(ordinals_file.read_text(encoding="utf-8").splitlines(), start=1):
            word = line.split("#", 1)[0].strip()
            if not word:
                continue
            if normalize_text(word) != word:
                problems.append(f"ordinals.txt:{line_no}: {word!r} is not normalised")
            ordinals.append(word)
    if problems:
        raise LexiconError(f"lexicon {folder.name} has {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    if not any(m.is_move for m in markers):
        raise LexiconError(f"lexicon {folder.name} has no move markers")
    return Lexicon(version=folder.name, markers=tuple(markers), ordinals=tuple(ordinals))
