"""The files the lexicon toolkit reads and writes, and their checks.

Every source writes candidates in one TSV format, so the build merges them uniformly:

    candidates/<source>.tsv   marker, move, source, provenance
                              (spans.tsv, extension.tsv, pattern.tsv from this toolkit; llm.tsv from
                              the LLM generation); provenance is a compact JSON object: where the
                              candidate came from (template and fillers, prefix and count, model, ...)
    candidates/labels.tsv     marker, move, label, labeller, reason
                              label: strong_true | weak_true | false (paper appendix A)
    decisions.tsv             span, decision, label, note (+ optional columns, kept as evidence)
                              decision: accept (label = a move) | distractor (label = a category)
                              | reject (label optional: why) | empty (not decided yet)

Marker text is normalised exactly like sentences (``ratio_spark.core.text.normalize_text``) with no
trailing comma. Files are in the project's one TSV dialect (``ratio_spark.core.tsv``). Every reader collects all
problems of a file and raises one error that lists them with their line numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ratio_spark.core.errors import UserError
from ratio_spark.core.schema import DISTRACTOR_CATEGORIES, MARKER_SOURCES, MOVES
from ratio_spark.core.text import normalize_text
from ratio_spark.core.tsv import read_tsv, write_tsv

CANDIDATE_COLUMNS = ("marker", "move", "source", "provenance")
LABEL_COLUMNS = ("marker", "move", "label", "labeller", "reason")
DECISION_COLUMNS = ("span", "decision", "label", "note")
LABELS = ("strong_true", "weak_true", "false")
DECISIONS = ("accept", "distractor", "reject")
# The file each source writes under candidates/ (spans.tsv holds the accepted span decisions).
SOURCE_FILES = {"manual": "spans.tsv", "extension": "extension.tsv", "llm": "llm.tsv", "pattern": "pattern.tsv"}
LABELS_FILE = "labels.tsv"


class LexiconInputError(UserError, ValueError):
    """A candidates, labels or decisions file that breaks the format; the message lists every problem."""


@dataclass(frozen=True)
class Candidate:
    marker: str  # normalised
    move: str
    source: str  # manual | extension | llm | pattern
    provenance: dict = field(default_factory=dict, hash=False, compare=False)
    where: str = field(default="", compare=False)  # file:line, for messages


@dataclass(frozen=True)
class Label:
    marker: str
    move: str
    label: str
    labeller: str
    reason: str
    where: str = ""


@dataclass(frozen=True)
class Decision:
    span: str  # normalised
    decision: str  # accept | distractor | reject | "" (undecided)
    label: str
    note: str
    extra: dict = field(default_factory=dict, hash=False, compare=False)  # other columns of the row
    where: str = ""


def normalise_marker(text: str) -> str:
    """Marker text as the matcher sees it: normalised like sentences, no trailing comma."""
    return (normalize_text(text or "") or "").rstrip(",").strip()


def dump_provenance(provenance: dict) -> str:
    return json.dumps(provenance, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _rows(path: Path, required: tuple[str, ...]) -> Iterable[tuple[str, dict]]:
    for line_no, row in read_tsv(path, required, error=LexiconInputError):
        yield f"{path.name}:{line_no}", row


def _check_marker(raw: str, where: str, problems: list[str]) -> str | None:
    if not raw:
        problems.append(f"{where}: empty marker")
        return None
    marker = normalise_marker(raw)
    if not marker:
        problems.append(f"{where}: marker {raw!r} is empty after normalisation")
        return None
    if "," in marker:
        problems.append(f"{where}: marker {raw!r} contains a comma; a marker is the text before a sentence's first comma")
        return None
    return marker


def _check_move(raw: str, where: str, problems: list[str]) -> str | None:
    move = raw.lower()
    if move not in MOVES:
        problems.append(f"{where}: move {raw!r} must be one of {MOVES}")
        return None
    return move


def _raise(path: Path, problems: list[str]) -> None:
    if problems:
        shown = problems[:50] + ([f"... and {len(problems) - 50} more"] if len(problems) > 50 else [])
        raise LexiconInputError(f"{path} has {len(problems)} problem(s):\n  " + "\n  ".join(shown))


def source_of(value: str, path: Path) -> str | None:
    """The lexicon source of a candidate row: its ``source`` column ("llm", "llm:gpt-4o", "pattern"),
    else the source whose file this is (llm.tsv -> llm), else None."""
    head = value.split(":", 1)[0].strip().lower()
    if head in MARKER_SOURCES:
        return head
    by_file = {name: source for source, name in SOURCE_FILES.items()}
    return by_file.get(path.name)


def read_candidates(path: str | Path) -> list[Candidate]:
    """Read one candidates TSV; the original ``source`` value is kept in provenance when it says more."""
    path = Path(path)
    problems: list[str] = []
    out: list[Candidate] = []
    for where, row in _rows(path, CANDIDATE_COLUMNS):
        marker = _check_marker(row["marker"], where, problems)
        move = _check_move(row["move"], where, problems)
        source = source_of(row["source"], path)
        if source is None:
            problems.append(f"{where}: source {row['source']!r} is not one of {MARKER_SOURCES} (nor is the file one of {sorted(SOURCE_FILES.values())})")
        try:
            provenance = json.loads(row["provenance"]) if row["provenance"] else {}
            if not isinstance(provenance, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            problems.append(f"{where}: provenance must be a JSON object ({exc})")
            provenance = {}
        if marker is None or move is None or source is None:
            continue
        if row["source"] and row["source"] != source:
            provenance = {**provenance, "source_detail": row["source"]}
        if marker != row["marker"]:
            provenance = {**provenance, "raw_marker": row["marker"]}
        out.append(Candidate(marker, move, source, provenance, where))
    _raise(path, problems)
    return out


def write_candidates(path: str | Path, candidates: Iterable[Candidate]) -> int:
    """Write candidates (one row per marker and move; later duplicates are skipped). Returns rows written."""
    seen: set[tuple[str, str]] = set()

    def rows():
        for c in candidates:
            if (c.marker, c.move) not in seen:
                seen.add((c.marker, c.move))
                yield [c.marker, c.move, c.source, dump_provenance(c.provenance)]

    return write_tsv(path, CANDIDATE_COLUMNS, rows())


def read_labels(path: str | Path) -> list[Label]:
    path = Path(path)
    problems: list[str] = []
    out: list[Label] = []
    for where, row in _rows(path, LABEL_COLUMNS):
        marker = _check_marker(row["marker"], where, problems)
        move, label = _check_move(row["move"], where, problems), row["label"].lower().replace("-", "_")
        if label not in LABELS:
            problems.append(f"{where}: label {row['label']!r} must be one of {LABELS}")
        if marker and move and label in LABELS:
            out.append(Label(marker, move, label, row["labeller"], row["reason"], where))
    _raise(path, problems)
    return out


def read_decisions(path: str | Path) -> list[Decision]:
    """Read a decisions TSV. A span decided twice the same way is fine; two different decisions are an error."""
    path = Path(path)
    problems: list[str] = []
    out: list[Decision] = []
    first: dict[str, Decision] = {}
    for where, row in _rows(path, DECISION_COLUMNS):
        span = _check_marker(row["span"], where, problems)
        decision, label = row["decision"].lower(), row["label"].lower()
        if decision and decision not in DECISIONS:
            problems.append(f"{where}: decision {row['decision']!r} must be one of {DECISIONS} or empty (undecided)")
            continue
        if decision == "accept" and label not in MOVES:
            problems.append(f"{where}: accept needs a move label {MOVES}, got {row['label']!r}")
            continue
        if decision == "distractor" and label not in DISTRACTOR_CATEGORIES:
            problems.append(f"{where}: distractor needs a category {DISTRACTOR_CATEGORIES}, got {row['label']!r}")
            continue
        if span is None:
            continue
        extra = {k: v for k, v in row.items() if k not in DECISION_COLUMNS and v}
        item = Decision(span, decision, label, row["note"], extra, where)
        earlier = first.get(span)
        if earlier is not None and decision and earlier.decision:
            if (earlier.decision, earlier.label) != (decision, label):
                problems.append(
                    f"{where}: {span!r} decided {decision} {label} here but {earlier.decision} {earlier.label} at {earlier.where}"
                )
            continue
        if earlier is not None and not decision:
            continue  # an undecided repeat adds nothing
        first[span] = item
        out.append(item)
    _raise(path, problems)
    # An undecided row followed by a decided one: keep the decision only.
    decided = {d.span for d in out if d.decision}
    return [d for d in out if d.decision or d.span not in decided]


def write_decisions(path: str | Path, decisions: Iterable[Decision], extra_columns: tuple[str, ...] = ()) -> int:
    rows = ([d.span, d.decision, d.label, d.note, *[d.extra.get(c, "") for c in extra_columns]] for d in decisions)
    return write_tsv(path, [*DECISION_COLUMNS, *extra_columns], rows)


def decisions_to_candidates(decisions: Iterable[Decision], origin: str = "") -> list[Candidate]:
    """Accepted decisions as manual-source candidates (what ``candidates/spans.tsv`` holds)."""
    out = []
    for d in decisions:
        if d.decision != "accept":
            continue
        provenance = {"decision": "accept", **({"note": d.note} if d.note else {}), **d.extra}
        if origin:
            provenance["decisions_file"] = origin
        out.append(Candidate(d.span, d.label, "manual", provenance))
    return out
