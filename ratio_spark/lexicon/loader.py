"""Versioned marker lexicons: load, validate, describe.

A lexicon version is a folder (dolma-style: the folder name is the version). The versions this project
curated (v1, v2, v3) live in the repository's top-level ``lexicons/``, ship as the package's data folder
``ratio_spark/lexicons/`` (``SHIPPED_DIR``), and load by name from a checkout, a wheel or a zip alike; any other
folder loads by its path:

    markers.tsv   one row per marker: marker, role, label, source, extendable, evidence
    ordinals.txt  ordinal and list openers removed from gold sentences ("firstly", "second", ...)
    README.md     how the version was built

``role`` is ``move`` (label address / broaden / specify) or ``distractor`` (label contrast /
similarity / continuation / inference / other). An ``extendable`` marker is a prefix ("to address")
whose extensions of up to ``mining.max_extension_words`` words ending at a comma all count as markers.
Marker text is normalised exactly as sentences are (``ratio_spark.core.text.normalize_text``), with no
comma in it or after it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ratio_spark.core.errors import UserError
from ratio_spark.core.files import read_text
from ratio_spark.core.schema import DISTRACTOR_CATEGORIES, MARKER_SOURCES, MOVES
from ratio_spark.core.text import normalize_text
from ratio_spark.core.tsv import read_tsv

if TYPE_CHECKING:
    from importlib.abc import Traversable

COLUMNS = ("marker", "role", "label", "source", "extendable", "evidence")


def _shipped_dir() -> Path | Traversable:
    """The folder of the shipped lexicons, in the two layouts there are. setup.py maps the repository's top-level
    ``lexicons/`` into the package, so a wheel and the zip of ``ratio-spark zip`` carry it as ``ratio_spark/lexicons/``.
    A source tree (``pyproject.toml`` beside the package) imports the package from its folder, by an editable install
    or ``PYTHONPATH``, and nothing maps the data folder there (an editable install cannot import a data folder mapped
    outside its package): the lexicons are the package's sibling.
    """
    source_tree = Path(__file__).parents[2]  # in the zip, a path into the zip file, which holds no pyproject.toml
    if (source_tree / "pyproject.toml").is_file():
        return source_tree / "lexicons"
    return resources.files("ratio_spark") / "lexicons"


# Package data: the shipped lexicon versions, the LLM prompts (prompts/) and the pattern lists (patterns/).
SHIPPED_DIR = _shipped_dir()


class LexiconError(UserError, ValueError):
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


def shipped_versions() -> list[str]:
    return sorted(p.name for p in SHIPPED_DIR.iterdir() if (p / "markers.tsv").is_file())


def lexicon_folder(name_or_path: str | Path | Traversable) -> Path | Traversable:
    """The folder of a lexicon: an existing folder path, else a version shipped with the package (v1, v2, v3).

    The one lookup of lexicons by name; a folder of the working directory wins over a shipped version.
    """
    if not isinstance(name_or_path, (str, Path)):
        return name_or_path  # already a folder (e.g. a shipped one)
    folder = Path(name_or_path).expanduser()
    if folder.is_dir():
        return folder
    name = str(name_or_path)
    if "/" not in name and (SHIPPED_DIR / name).is_dir():
        return SHIPPED_DIR / name
    raise LexiconError(f"no lexicon {name!r}: not a folder, and not a shipped version ({', '.join(shipped_versions())}); "
                       "give a version name or the path of a lexicon folder")


def load_lexicon(path: str | Path | Traversable) -> Lexicon:
    """Load and validate a lexicon: a shipped version name (v1, v2, v3) or the path of a lexicon folder."""
    folder = lexicon_folder(path)
    markers_file = folder / "markers.tsv"
    if not markers_file.is_file():
        raise LexiconError(f"no markers.tsv in lexicon folder {folder}: is it a lexicon folder?")
    problems: list[str] = []
    markers: list[Marker] = []
    seen: dict[str, int] = {}
    for line_no, row in read_tsv(markers_file, COLUMNS, error=LexiconError):
        where = f"{markers_file.name}:{line_no}"
        text, role, label, source = row["marker"], row["role"], row["label"], row["source"]
        extendable = _parse_bool(row["extendable"])
        if not text:
            problems.append(f"{where}: empty marker")
            continue
        if "," in text.rstrip(","):
            # A marker ends at the first comma of the sentence it opens; with a comma inside, it would
            # match only where a second comma follows ("in turn, for example, ...").
            problems.append(
                f"{where}: marker {text!r} contains a comma; a marker is the words before its comma: "
                "list each part as its own marker or drop the entry"
            )
        elif text.endswith(",") or normalize_text(text) != text:
            problems.append(
                f"{where}: marker {text!r} is not normalised like sentences (expected {normalize_text(text).rstrip(',')!r}, no comma)"
            )
        if role not in ("move", "distractor"):
            problems.append(f"{where}: role {role!r} must be move or distractor")
        elif role == "move" and label not in MOVES:
            problems.append(f"{where}: move label {label!r} must be one of {MOVES}")
        elif role == "distractor" and label not in DISTRACTOR_CATEGORIES:
            problems.append(f"{where}: distractor category {label!r} must be one of {DISTRACTOR_CATEGORIES}")
        if source not in MARKER_SOURCES:
            problems.append(f"{where}: source {source!r} must be one of {MARKER_SOURCES}")
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
        markers.append(Marker(text, role, label, source, bool(extendable), row["evidence"]))
    ordinals_file = folder / "ordinals.txt"
    ordinals: list[str] = []
    if ordinals_file.is_file():
        for line_no, line in enumerate(read_text(ordinals_file, LexiconError).splitlines(), start=1):
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
