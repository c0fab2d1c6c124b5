"""LLM generation and labelling of discourse-marker candidates (paper §4.1 "LLM generation", appendix A).

Generation: each named model (the paper used three model families, so that the lexicon does not
inherit one model's phrasing) receives the move's definition, its subcategories and seed markers from
the lexicon, and proposes new markers. Labelling: one model labels every candidate, from any source,
as ``strong_true`` (signals the move in almost all contexts), ``weak_true`` (only in some) or
``false``; the lexicon build keeps only ``strong_true``.

Prompts are versioned package data in the top-level ``lexicons/prompts/`` (``generate_markers.v1.txt``,
``label_marker.v1.txt``, with the move definitions in ``moves.v1.yaml``); every row records the
prompt file it came from. All calls go through ``ratio_spark.llm.LLMClient``, so a rerun is served
from the cache and costs nothing.

Files (read by the lexicon build):
    lexicons/<version>/candidates/<source>.tsv   marker, move, source, provenance (compact JSON)
    lexicons/<version>/candidates/labels.tsv     marker, move, label, labeller, reason
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import yaml

from ratio_spark.core.schema import DEFAULT_MAX_EXTENSION_WORDS
from ratio_spark.core.errors import UserError
from ratio_spark.core.prompts import PromptFile, read_prompt
from ratio_spark.core.tsv import read_tsv, write_tsv
from ratio_spark.lexicon.curation.formats import LABELS, LABELS_FILE
from ratio_spark.lexicon.loader import SHIPPED_DIR
from ratio_spark.llm import ChatRequest, LLMClient

if TYPE_CHECKING:
    from importlib.abc import Traversable

PROMPTS_DIR = SHIPPED_DIR / "prompts"
GENERATE_PROMPT = "generate_markers.v1.txt"
LABEL_PROMPT = "label_marker.v1.txt"
MOVES_FILE = "moves.v1.yaml"
MAX_MARKER_WORDS = 10  # curated spans have at most 7 words; extensions add up to 5 after a short prefix
_PHRASE = re.compile(r"[a-z0-9][a-z0-9 '\-/]*")


class LexiconLLMError(UserError, ValueError):
    """A prompt, move definition or candidate file that cannot be used; the message says which and why."""


# ---------------------------------------------------------------------------------------------- prompts


def _folder(folder: str | Path | Traversable) -> Path | Traversable:
    return Path(folder) if isinstance(folder, str) else folder


def load_prompt(file: str, prompts_dir: str | Path | Traversable = PROMPTS_DIR) -> PromptFile:
    """A ``name.vN.txt`` prompt of ``prompts_dir`` (``core.prompts.read_prompt``), its errors LexiconLLMError."""
    return read_prompt(_folder(prompts_dir) / file, LexiconLLMError)


def load_moves(prompts_dir: str | Path | Traversable = PROMPTS_DIR, file: str = MOVES_FILE) -> dict:
    path = _folder(prompts_dir) / file
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, KeyError):  # KeyError: a file missing from a zipped package
        raise LexiconLLMError(f"move definitions not found: {path}") from None
    if not isinstance(data, dict) or "moves" not in data or "marker_conditions" not in data:
        raise LexiconLLMError(f"{path} must have marker_conditions and moves")
    for move, spec in data["moves"].items():
        missing = [k for k in ("title", "definition", "subcategories", "valid_examples", "invalid_examples") if k not in spec]
        if missing:
            raise LexiconLLMError(f"{path}: move {move} lacks {missing}")
    return data


def move_values(moves: dict, move: str) -> dict[str, str]:
    """The placeholders every marker prompt shares, for one move."""
    if move not in moves["moves"]:
        raise LexiconLLMError(f"move {move!r} has no definition in {MOVES_FILE}; defined: {sorted(moves['moves'])}")
    spec = moves["moves"][move]
    return {
        "move_title": spec["title"],
        "definition": " ".join(spec["definition"].split()),
        "conditions": moves["marker_conditions"].strip(),
        "subcategories": "\n".join(f"- {s}" for s in spec["subcategories"]),
        "valid_examples": "; ".join(f'"{s}"' for s in spec["valid_examples"]),
        "invalid_examples": "; ".join(f'"{s}"' if " (" not in s else s for s in spec["invalid_examples"]),
    }


# ---------------------------------------------------------------------------------------------- markers


def clean_marker(text: object) -> tuple[str | None, str | None]:
    """(marker, None) normalised like lexicon markers (lowercase, no trailing comma), or (None, why dropped)."""
    from ratio_spark.core.text import normalize_text

    if not isinstance(text, str):
        return None, "not_text"
    marker = normalize_text(text.strip().strip("\"'`\u201c\u201d\u2018\u2019")) or ""
    marker = marker.rstrip(",.;:!? ").strip("\"'`\u201c\u201d\u2018\u2019 ")
    marker = normalize_text(marker) or ""
    if not marker:
        return None, "empty"
    if not _PHRASE.fullmatch(marker):
        return None, "not_a_phrase"
    if len(marker.split()) > MAX_MARKER_WORDS:
        return None, "too_long"
    return marker, None


def generate_schema(n: int) -> dict:
    return {
        "type": "object",
        "properties": {"markers": {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 80},
                                   "minItems": 1, "maxItems": n}},
        "required": ["markers"],
    }


LABEL_SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string", "maxLength": 300}, "label": {"type": "string", "enum": list(LABELS)}},
    "required": ["reason", "label"],
}


def compact_json(value: dict) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def generate_candidates(client: LLMClient, model_names: list[str], move: str, seeds: Iterable[str], n: int, *,
                        rounds: int = 1, exclude: Iterable[str] = (), extendable_prefixes: Iterable[str] = (),
                        prompt: PromptFile | None = None,
                        moves: dict | None = None, stats: Counter | None = None,
                        max_tokens: int | None = None) -> list[dict]:
    """Ask every model in ``model_names`` for ``n`` new markers of ``move`` per round; candidate rows
    (marker, move, source "llm", provenance) of the markers that are not seeds or in ``exclude``.

    Round r > 1 shows each model the markers it proposed before, so later rounds add new ones.
    A marker that an extendable prefix already covers ("to address" + up to mining.max_extension_words words) is dropped.
    ``stats`` (a Counter) receives the counts: proposed, kept, and each reason a phrase was dropped.
    """
    prompt = prompt or load_prompt(GENERATE_PROMPT)
    moves = moves or load_moves()
    stats = stats if stats is not None else Counter()
    values = move_values(moves, move)
    seed_list = [s for s in dict.fromkeys(seeds) if s]
    known = {clean_marker(s)[0] or s for s in [*seed_list, *exclude]}
    prefixes = [p for p in extendable_prefixes if p]
    proposed: dict[str, list[str]] = {}  # marker -> models that proposed it, in order
    by_model: dict[str, list[str]] = {name: [] for name in model_names}
    schema = generate_schema(n)
    for round_no in range(1, rounds + 1):
        for name in model_names:
            client.endpoint(name)  # fail early on an unknown endpoint
            before = by_model[name]
            exclude_text = ""
            if before:
                exclude_text = "\nMarkers you proposed before (do not repeat them either):\n" + "\n".join(f"- {m}" for m in before) + "\n"
            messages = prompt.render(**values, seeds="\n".join(f"- {s}" for s in seed_list) or "(none yet)",
                                     n=str(n), exclude=exclude_text)
            request = ChatRequest(f"generate:{move}:{name}:round{round_no}", messages, schema,
                                  max_tokens=max_tokens or 40 + 16 * n)
            [result] = client.complete_json([request], name)
            stats["requests"] += 1
            if result.error:
                stats[f"failed_requests:{result.error}"] += 1
                continue
            for raw in result.data["markers"]:
                stats["proposed"] += 1
                marker, why = clean_marker(raw)
                if marker is None:
                    stats[f"dropped:{why}"] += 1
                elif marker in known:
                    stats["dropped:already_in_lexicon"] += 1
                elif any(marker.startswith(p + " ") and len(marker[len(p):].split()) <= DEFAULT_MAX_EXTENSION_WORDS for p in prefixes):
                    stats["dropped:covered_by_extendable_prefix"] += 1
                elif name in proposed.get(marker, []):
                    stats["dropped:repeated_by_same_model"] += 1
                else:
                    if marker in proposed:
                        stats["also_proposed_by_another_model"] += 1
                    proposed.setdefault(marker, []).append(name)
                    before.append(marker)
    rows = [
        {"marker": marker, "move": move, "source": "llm",
         "provenance": compact_json({"model": models[0], "models": models, "prompt": prompt.file})}
        for marker, models in proposed.items()
    ]
    stats["kept"] += len(rows)
    return sorted(rows, key=lambda r: r["marker"])


def labeller_name(model: str, prompt: PromptFile) -> str:
    return f"{model}+{prompt.id}"


def label_candidates(client: LLMClient, model: str, candidates: Iterable[dict], *, prompt: PromptFile | None = None,
                     moves: dict | None = None, stats: Counter | None = None, batch_state_dir: str | Path | None = None,
                     max_tokens: int = 160) -> list[dict]:
    """Label each distinct (marker, move) of ``candidates`` strong_true / weak_true / false with one
    model; label rows (marker, move, label, labeller, reason). Failed requests give no row: they are
    counted in ``stats`` (``failed:<error>``) and asked again by the next run. ``batch_state_dir``:
    use the Batch API (resumable) instead of synchronous calls."""
    prompt = prompt or load_prompt(LABEL_PROMPT)
    moves = moves or load_moves()
    stats = stats if stats is not None else Counter()
    client.endpoint(model)
    pairs = list(dict.fromkeys((c["marker"], c["move"]) for c in candidates))
    requests = []
    for marker, move in pairs:
        messages = prompt.render(**move_values(moves, move), marker=marker)
        requests.append(ChatRequest(f"label:{move}:{marker}", messages, LABEL_SCHEMA, max_tokens=max_tokens))
    if batch_state_dir is not None:
        results = client.run_batch(requests, model, state_dir=batch_state_dir)
    else:
        results = client.complete_json(requests, model, progress=f"label with {model}")
    labeller = labeller_name(model, prompt)
    rows = []
    for (marker, move), result in zip(pairs, results):
        stats["candidates"] += 1
        if result.error:
            stats[f"failed:{result.error}"] += 1
            continue
        label = result.data["label"]
        stats[f"label:{label}"] += 1
        reason = " ".join(str(result.data.get("reason", "")).split())
        rows.append({"marker": marker, "move": move, "label": label, "labeller": labeller, "reason": reason})
    return rows


# ---------------------------------------------------------------------------------------------- files


def candidates_dir(version: str, lexicon_root: str | Path = "lexicons") -> Path:
    return Path(lexicon_root) / version / "candidates"


def read_rows(path: str | Path, columns: tuple[str, ...]) -> list[dict]:
    """The rows of a candidates or labels TSV (``core.tsv``); none when the file does not exist yet."""
    if not Path(path).exists():
        return []
    return [row for _, row in read_tsv(path, columns, error=LexiconLLMError)]


def write_rows(path: str | Path, rows: list[dict], columns: tuple[str, ...]) -> None:
    """Rows sorted by move then marker, in the project's TSV dialect (``core.tsv``), replaced atomically."""
    ordered = sorted(rows, key=lambda r: (r["move"], r["marker"], r.get("labeller", ""), r.get("source", "")))
    write_tsv(path, columns, ([row.get(c, "") for c in columns] for row in ordered))


def merge_candidates(existing: list[dict], new: list[dict]) -> list[dict]:
    """Union by (marker, move); an LLM marker proposed again by other models lists them all."""
    merged = {(r["marker"], r["move"]): dict(r) for r in existing}
    for row in new:
        key = (row["marker"], row["move"])
        if key not in merged:
            merged[key] = dict(row)
            continue
        try:
            old, add = json.loads(merged[key]["provenance"]), json.loads(row["provenance"])
            models = list(dict.fromkeys([*old.get("models", []), *add.get("models", [])]))
            merged[key]["provenance"] = compact_json({**old, "models": models})
        except (json.JSONDecodeError, AttributeError):
            pass
    return list(merged.values())


def merge_labels(existing: list[dict], new: list[dict]) -> list[dict]:
    """One label per (marker, move, labeller); a new label replaces the old one."""
    merged = {(r["marker"], r["move"], r["labeller"]): r for r in existing}
    merged.update({(r["marker"], r["move"], r["labeller"]): r for r in new})
    return list(merged.values())


# Sources labelled by default: generated ones. Manual spans and extensions were vetted by curators; the
# lexicon build filters a source by labels.tsv as soon as any of its candidates is labelled, so they are
# labelled only when named explicitly.
DEFAULT_LABEL_SOURCES = ("llm", "pattern")


def read_all_candidates(folder: str | Path, sources: list[str] | None = None) -> list[dict]:
    """Candidate rows of ``<source>.tsv`` for each of ``sources`` (default: those of
    ``DEFAULT_LABEL_SOURCES`` that exist); never labels.tsv."""
    folder = Path(folder)
    if sources:
        files = [folder / f"{s}.tsv" for s in sources]
        missing = sorted(p.name for p in files if not p.exists())
        if missing:
            raise LexiconLLMError(f"no candidate file {', '.join(missing)} in {folder}")
        if any(p.name == LABELS_FILE for p in files):
            raise LexiconLLMError(f"{LABELS_FILE} holds labels, not candidates")
    else:
        files = [folder / f"{s}.tsv" for s in DEFAULT_LABEL_SOURCES if (folder / f"{s}.tsv").exists()]
    rows = []
    for path in files:
        rows.extend(read_rows(path, ("marker", "move")))
    return rows
