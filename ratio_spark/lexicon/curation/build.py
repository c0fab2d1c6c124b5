"""Build a lexicon version from candidate sources, curator decisions and an optional base version.

Inputs (any may be absent, but something must propose a move marker):

* ``base``: an earlier lexicon version; its markers enter with their own source, flag and evidence.
* ``candidates/*.tsv``: the four sources in the shared candidates format (``formats``). When
  ``candidates/labels.tsv`` labels any candidate of a source, that source is *labelled*: only its
  candidates labelled strong_true (by every labeller that labelled them) are kept (paper appendix A).
* decisions files: the curator's word, which overrides the sources. ``accept`` makes the marker a
  marker of that move (and resolves a conflict between sources), ``distractor`` makes it a
  distractor of that category, ``reject`` removes it. An accepted marker that no source proposes
  enters as a manual marker.
* ``require_decision``: sources whose candidates enter only when a decision accepts them (for
  example pattern output, of which the curator reads the attested part).

Rules:

1. **Disjointness.** A marker claimed for two moves, or for a move and as a distractor, is an error
   listing every conflict and its sources, unless a decision settles it. So is a listed marker that
   an extendable prefix of another move or role covers (the matcher would give it to the prefix).
2. **Extensions.** In ``prefix`` mode (default) the extensions of a prefix enter as one extendable
   marker, the prefix, which matches any extension of up to five words on any corpus (the paper's
   Table 4 counts it as one marker); an individually rejected extension is reported, since the prefix
   still matches it. In ``enumerate`` mode every attested extension is a marker of its own.
3. **Coverage.** A listed marker that an extendable prefix of the same move already covers adds
   nothing to matching: it is left out and counted as covered (like the paper's "already produced").
4. **Source.** A marker's ``source`` is the first of manual, extension, llm, pattern that produced it
   (what Table 4 counts), except that an extendable prefix is always an extension; ``provenance``
   lists every source that produced it (an unvetted claim of a ``require_decision`` source that
   agrees included) with its details, and the decision.

Outputs: ``markers.tsv`` (the lexicon columns plus ``provenance``), ``ordinals.txt`` (from the base or
given), ``build.json`` (inputs, counts, everything dropped and why). ``load_lexicon`` reads the result.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ratio_spark.core.config import DEFAULT_MAX_EXTENSION_WORDS
from ratio_spark.core.errors import UserError
from ratio_spark.core.schema import MARKER_SOURCES, MOVES
from ratio_spark.core.tsv import write_tsv
from ratio_spark.lexicon.loader import COLUMNS, LexiconError, lexicon_folder, load_lexicon
from ratio_spark.lexicon.curation.formats import (
    LABELS_FILE,
    Candidate,
    Decision,
    LexiconInputError,
    dump_provenance,
    read_candidates,
    read_decisions,
    read_labels,
)

MARKER_COLUMNS = (*COLUMNS, "provenance")
SOURCE_ORDER = {s: i for i, s in enumerate(MARKER_SOURCES)}
ROLE_ORDER = {"move": 0, "distractor": 1}
EXTENSION_MODES = ("prefix", "enumerate")
DETAIL_LIMIT = 500


class LexiconBuildError(UserError, ValueError):
    """The sources cannot be merged as they are; the message lists every conflict and how to settle it."""


@dataclass
class Claim:
    """One source's word on a marker: its role and label, and where it came from."""

    role: str
    label: str
    source: str
    extendable: bool = False
    evidence: str = ""
    provenance: dict = field(default_factory=dict)
    origin: str = ""  # base:<version> | candidates:<file> | decision


@dataclass
class Entry:
    marker: str
    role: str
    label: str
    source: str
    extendable: bool
    evidence: str
    provenance: dict

    def row(self) -> list[str]:
        return [self.marker, self.role, self.label, self.source, str(self.extendable).lower(), self.evidence,
                dump_provenance(self.provenance)]


@dataclass
class BuildResult:
    entries: list[Entry]
    summary: dict


def _candidate_files(candidates_dir: Path | None, extra: list[Path]) -> list[Path]:
    files = []
    if candidates_dir is not None:
        if not candidates_dir.is_dir():
            raise LexiconInputError(f"candidates folder {candidates_dir} does not exist")
        files += sorted(p for p in candidates_dir.glob("*.tsv") if p.name != LABELS_FILE)
    return files + [Path(p) for p in extra]


def _filter_by_labels(candidates: list[Candidate], labels_file: Path | None, summary: dict) -> list[Candidate]:
    """Keep only strong_true candidates of labelled sources; count what is dropped and why."""
    if labels_file is None or not labels_file.exists():
        summary["labels"] = None
        return candidates
    labels = read_labels(labels_file)
    by_key: dict[tuple[str, str], list[str]] = defaultdict(list)
    for label in labels:
        by_key[(label.marker, label.move)].append(label.label)
    labelled_sources = {c.source for c in candidates if (c.marker, c.move) in by_key}
    kept, dropped = [], Counter()
    for c in candidates:
        if c.source not in labelled_sources:
            kept.append(c)
            continue
        found = by_key.get((c.marker, c.move))
        if not found:
            dropped[f"{c.source}:unlabelled"] += 1
        elif all(lab == "strong_true" for lab in found):
            kept.append(c)
        else:
            worst = "false" if "false" in found else "weak_true"
            dropped[f"{c.source}:{worst}"] += 1
    summary["labels"] = {
        "file": str(labels_file),
        "labels": len(labels),
        "labelled_sources": sorted(labelled_sources),
        "dropped": dict(sorted(dropped.items())),
        "label_counts": dict(Counter(label.label for label in labels)),
    }
    return kept


def _covers(prefix: str, marker: str, max_words: int) -> bool:
    if marker == prefix:
        return True
    if not marker.startswith(prefix + " "):
        return False
    return len(marker.split(" ")) - len(prefix.split(" ")) <= max_words


def _evidence_for(claims: list[Claim], decision: Decision | None) -> str:
    """Evidence text: a decision's note, the base evidence, else a summary of the first source."""
    parts = []
    base = next((c for c in claims if c.origin.startswith("base:") and c.evidence), None)
    if base is not None:
        parts.append(base.evidence)
    if decision is not None and decision.note and decision.note not in parts:
        parts.append(decision.note)
    if not parts and claims:
        first = claims[0]
        p = first.provenance
        if first.source == "pattern" and "template" in p:
            fillers = ", ".join(f"{k}={v}" for k, v in p.get("fillers", {}).items())
            parts.append(f"pattern {p['template']}: {p.get('pattern', '')} ({fillers})")
        elif first.source == "extension" and "prefix" in p:
            parts.append(f"extension of {p['prefix']}: {p.get('sentences', '?')} sentence openings")
        elif first.source == "llm":
            parts.append("llm " + ", ".join(f"{k}={v}" for k, v in p.items() if isinstance(v, (str, int, float)))[:300])
        elif first.evidence:
            parts.append(first.evidence)
        else:
            parts.append(first.source)
    return "; ".join(parts)


def build_lexicon(
    out: str | Path,
    *,
    candidates_dir: str | Path | None = None,
    candidate_files: list[str | Path] | None = None,
    decisions_files: list[str | Path] | None = None,
    base: str | Path | None = None,
    extensions: str = "prefix",
    require_decision: tuple[str, ...] = (),
    ordinals: str | Path | None = None,
    max_extension_words: int = DEFAULT_MAX_EXTENSION_WORDS,
    command: str = "",
) -> BuildResult:
    """Merge the inputs into ``out`` (markers.tsv, ordinals.txt, build.json); raise on conflicts."""
    started = time.time()
    if extensions not in EXTENSION_MODES:
        raise LexiconInputError(f"extensions mode {extensions!r} must be one of {EXTENSION_MODES}")
    unknown = sorted(set(require_decision) - set(MARKER_SOURCES))
    if unknown:
        raise LexiconInputError(f"require_decision sources {unknown} must be among {MARKER_SOURCES}")
    out = Path(out)
    candidates_dir = Path(candidates_dir) if candidates_dir else None
    summary: dict = {"version": out.name, "command": command, "extensions_mode": extensions,
                     "require_decision": list(require_decision)}

    # 1. Inputs ----------------------------------------------------------------------------------
    claims: dict[str, list[Claim]] = defaultdict(list)
    base_folder = lexicon_folder(base) if base is not None else None
    base_lexicon = load_lexicon(base_folder) if base_folder is not None else None
    if base_lexicon is not None:
        for m in base_lexicon.markers:
            claims[m.text].append(Claim(m.role, m.label, m.source, m.extendable, m.evidence,
                                        {"base": base_lexicon.version}, f"base:{base_lexicon.version}"))
        summary["base"] = {"version": base_lexicon.version, "folder": str(base_folder), "markers": len(base_lexicon.markers)}

    files = _candidate_files(candidates_dir, [Path(p) for p in candidate_files or []])
    candidates: list[Candidate] = []
    per_file = {}
    for path in files:
        rows = read_candidates(path)
        per_file[str(path)] = len(rows)
        candidates += rows
    summary["candidate_files"] = per_file
    summary["candidates_by_source"] = dict(Counter(c.source for c in candidates))
    labels_file = candidates_dir / LABELS_FILE if candidates_dir is not None else None
    candidates = _filter_by_labels(candidates, labels_file, summary)

    decisions: dict[str, Decision] = {}
    decision_files = [Path(p) for p in decisions_files or []]
    undecided = 0
    for path in decision_files:
        for d in read_decisions(path):
            if not d.decision:
                undecided += 1
                continue
            earlier = decisions.get(d.span)
            if earlier is not None and (earlier.decision, earlier.label) != (d.decision, d.label):
                raise LexiconBuildError(
                    f"decisions disagree on {d.span!r}: {earlier.decision} {earlier.label} at {earlier.where} "
                    f"but {d.decision} {d.label} at {path.name}:{d.where}"
                )
            decisions.setdefault(d.span, d)
    summary["decisions"] = {"files": [str(p) for p in decision_files], **Counter(d.decision for d in decisions.values()),
                            "undecided_rows": undecided}

    # 2. Extensions: group by prefix ---------------------------------------------------------------
    rejected_extensions = []
    extension_groups: dict[str, list[Candidate]] = defaultdict(list)
    others: list[Candidate] = []
    for c in candidates:
        if c.source == "extension" and extensions == "prefix" and c.provenance.get("prefix"):
            extension_groups[c.provenance["prefix"]].append(c)
        else:
            others.append(c)
    problems: list[str] = []
    for prefix, group in sorted(extension_groups.items()):
        moves = sorted({c.move for c in group})
        if len(moves) > 1:
            problems.append(f"prefix {prefix!r}: its extensions are candidates of several moves {moves}")
            continue
        sentences = sum(int(c.provenance.get("sentences", 0) or 0) for c in group)
        attested = [c for c in group if int(c.provenance.get("sentences", 0) or 0) > 0]
        provenance = {"prefix": prefix, "extensions": len(attested), "sentences": sentences,
                      "top_extensions": [c.marker for c in sorted(attested, key=lambda c: -int(c.provenance.get("sentences", 0)))[:5]]}
        evidence = f"extendable connective; {sentences} sentence openings with it (+ up to {max_extension_words} words + comma), {len(attested)} distinct"
        claims[prefix].append(Claim("move", moves[0], "extension", True, evidence, provenance, "candidates:extension"))
        for c in group:
            d = decisions.get(c.marker)
            if c.marker != prefix and d is not None and d.decision != "accept":
                rejected_extensions.append({"extension": c.marker, "prefix": prefix, "decision": d.decision, "where": d.where})

    for c in others:
        claims[c.marker].append(Claim("move", c.move, c.source, False, "", c.provenance, f"candidates:{c.where.split(':')[0]}"))

    # 3. Decisions settle, then disjointness -------------------------------------------------------
    dropped: dict[str, list] = defaultdict(list)
    resolved: dict[str, tuple[str, str, list[Claim], Decision | None]] = {}
    for marker in sorted(set(claims) | set(decisions)):
        marker_claims = claims.get(marker, [])
        d = decisions.get(marker)
        if d is not None:
            if d.decision == "reject":
                dropped["rejected_by_decision"].append(marker)
                continue
            role, label = ("move", d.label) if d.decision == "accept" else ("distractor", d.label)
            agreeing = [c for c in marker_claims if (c.role, c.label) == (role, label)]
            overridden = [c for c in marker_claims if (c.role, c.label) != (role, label)]
            if overridden:
                dropped["overridden_claims"].append({"marker": marker, "kept": f"{role}:{label}",
                                                     "overridden": sorted({f"{c.role}:{c.label} ({c.source})" for c in overridden})})
            if not agreeing:
                agreeing = [Claim(role, label, "manual", False, d.note, {"decision_only": True}, "decision")]
            resolved[marker] = (role, label, agreeing, d)
            continue
        kept = [c for c in marker_claims if c.source not in require_decision or c.origin.startswith("base:")]
        if len(kept) < len(marker_claims) and not kept:
            dropped["needs_decision"].append(marker)
            continue
        kinds = sorted({(c.role, c.label) for c in kept})
        if len(kinds) > 1:
            detail = "; ".join(f"{role}:{label} from " + ", ".join(sorted({c.origin for c in kept if (c.role, c.label) == (role, label)}))
                               for role, label in kinds)
            problems.append(f"{marker!r} is claimed as {detail}")
            continue
        # An unvetted claim of a require_decision source that agrees still counts as having produced it.
        resolved[marker] = (*kinds[0], [c for c in marker_claims if (c.role, c.label) == kinds[0]], None)

    # Extendable prefixes: listed markers they cover.
    prefixes = {m: v for m, v in resolved.items() if any(c.extendable for c in v[2])}
    entries: list[Entry] = []
    covered = []
    for marker, (role, label, marker_claims, d) in sorted(resolved.items()):
        extendable = any(c.extendable for c in marker_claims)
        if not extendable:
            cover = next((p for p in prefixes if _covers(p, marker, max_extension_words)), None)
            if cover is not None:
                p_role, p_label = prefixes[cover][:2]
                if (p_role, p_label) == (role, label):
                    covered.append({"marker": marker, "prefix": cover, "sources": sorted({c.source for c in marker_claims})})
                    continue
                if d is None:
                    problems.append(
                        f"{marker!r} ({role}:{label}) is covered by extendable prefix {cover!r} ({p_role}:{p_label}); "
                        "add a decision for it if the listed marker should win (a listed marker beats an extension of equal length)"
                    )
                    continue
        sources = sorted({c.source for c in marker_claims}, key=SOURCE_ORDER.get)
        if extendable:  # Table 4's "extendable connective" row: the prefix counts there, whoever found it first
            sources = ["extension", *[s for s in sources if s != "extension"]]
        provenance: dict = {"sources": sources}
        for c in marker_claims:
            if c.provenance and c.source not in provenance:
                provenance[c.source] = c.provenance
        if any(c.origin.startswith("base:") for c in marker_claims):
            provenance["base"] = base_lexicon.version if base_lexicon else "base"
        if d is not None:
            provenance["decision"] = {"decision": d.decision, "label": d.label, "where": d.where}
        entries.append(Entry(marker, role, label, sources[0], extendable, _evidence_for(marker_claims, d), provenance))

    if problems:
        raise LexiconBuildError(
            f"cannot build {out.name}: {len(problems)} conflict(s); settle each with a row in a decisions file "
            "(span<TAB>accept<TAB>move, span<TAB>distractor<TAB>category, or span<TAB>reject):\n  " + "\n  ".join(problems[:100])
            + (f"\n  ... and {len(problems) - 100} more" if len(problems) > 100 else "")
        )
    if not any(e.role == "move" for e in entries):
        raise LexiconBuildError(f"cannot build {out.name}: no move markers (give candidates, decisions or a base lexicon)")

    # 4. Write ---------------------------------------------------------------------------------------
    entries.sort(key=lambda e: (ROLE_ORDER[e.role], MOVES.index(e.label) if e.role == "move" else 0, e.label,
                                SOURCE_ORDER[e.source], not e.extendable, e.marker))
    out.mkdir(parents=True, exist_ok=True)
    write_tsv(out / "markers.tsv", MARKER_COLUMNS, (e.row() for e in entries))
    ordinals_source = Path(ordinals) if ordinals else (base_folder or lexicon_folder("v1")) / "ordinals.txt"
    if ordinals_source.is_file() and not (isinstance(ordinals_source, Path) and ordinals_source.resolve() == (out / "ordinals.txt").resolve()):
        (out / "ordinals.txt").write_bytes(ordinals_source.read_bytes())
    try:
        lexicon = load_lexicon(out)
    except LexiconError as exc:  # the build must never write what the loader refuses
        raise LexiconBuildError(f"the built lexicon does not load: {exc}") from None

    counts = Counter((e.role, e.label, e.source) for e in entries)
    produced = Counter((e.role, e.label, s) for e in entries for s in e.provenance["sources"])
    summary.update({
        "markers": len(entries),
        "markers_by_role_label_source": {f"{r}:{l}:{s}": n for (r, l, s), n in sorted(counts.items())},
        "produced_by_role_label_source": {f"{r}:{l}:{s}": n for (r, l, s), n in sorted(produced.items())},
        "extendable": sum(1 for e in entries if e.extendable),
        "covered_by_extendable_prefix": len(covered),
        "covered_by_source": dict(Counter(s for c in covered for s in c["sources"][:1])),
        "dropped": {k: len(v) for k, v in dropped.items()},
        "rejected_extensions_still_matched_by_prefix": rejected_extensions,
        "ordinals": len(lexicon.ordinals),
        "seconds": round(time.time() - started, 2),
        # Every covered or dropped marker, up to DETAIL_LIMIT per list (the counts above are complete).
        "details": {k: v[:DETAIL_LIMIT] for k, v in {"covered": covered, **dropped}.items()},
    })
    (out / "build.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return BuildResult(entries, summary)
