"""Pattern expansion (paper appendix A, Table 3): Hearst-style templates filled from term lists.

Templates and term lists are package data in the top-level ``lexicons/patterns/`` (``--patterns DIR`` for another set):

    templates.tsv        id, move, template, note
    terms/<slot>.tsv     term, pos (verb | noun | adj | fixed), number (nouns: both | sg | pl),
                         noun (the noun form of a verb: solve -> solution), note; '#' lines are comments

Template syntax (the paper's Table 3 notation, stored in lemmatised form):

    word          fixed text
    [slot]        a term from terms/slot.tsv in every inflected form of its part of speech
                  (verbs: VB VBZ VBD VBG VBN; nouns: NN NNS as their ``number`` allows)
    [slot:VBG]    only the listed forms, joined by +: [slot:VB+VBG]; ``noun`` is the term's noun
                  form (address -> solution), ``lemma`` the term as written
    [this]        a demonstrative that agrees in number with the next noun slot: this/that before a
                  singular, these/those before a plural; [this:sg], [this:pl] restrict it where no
                  noun follows, [this:near] (this/these) and [this:far] (that/those) restrict the word
    [a]           the indefinite article, a or an by the next word's first letter
    ( ... )       optional
    { a | b }     alternatives, one is chosen

Inflection uses pyinflect (no data download); its first spelling is used, and a word pyinflect does
not know is inflected by its regular rules (``inflect_oov``). A multi-word verb inflects its first
word (deal with -> dealing with), a multi-word noun its last (data set -> data sets). Every
candidate keeps the template and the fillers it came from in its provenance.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyinflect

from ratio_spark.core.schema import MOVES
from ratio_spark.core.tsv import read_tsv
from ratio_spark.lexicon.loader import SHIPPED_DIR
from ratio_spark.lexicon.curation.formats import Candidate, LexiconInputError, normalise_marker

if TYPE_CHECKING:
    from importlib.abc import Traversable

DEFAULT_PATTERNS_DIR = SHIPPED_DIR / "patterns"
VERB_FORMS = ("VB", "VBZ", "VBD", "VBG", "VBN")
NOUN_FORMS = ("NN", "NNS")
POS = ("verb", "noun", "adj", "fixed")
DEMONSTRATIVES = {"sg": ("this", "that"), "pl": ("these", "those")}
DEM_RESTRICTIONS = {"": None, "sg": {"this", "that"}, "pl": {"these", "those"}, "near": {"this", "these"}, "far": {"that", "those"}}
_TOKEN = re.compile(r"\[[^\[\]]*\]|[(){}|\[\]]|[^\s\[\](){}|]+")


@dataclass(frozen=True)
class Term:
    term: str
    pos: str
    number: str = "both"  # nouns only
    noun: str = ""  # verbs: the noun form


@dataclass(frozen=True)
class Template:
    id: str
    move: str
    template: str
    note: str = ""


# --- parsed template items -------------------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    text: str


@dataclass(frozen=True)
class Slot:
    name: str
    forms: tuple[str, ...]  # empty: every form of the term's part of speech


@dataclass(frozen=True)
class Demonstrative:
    restrict: str  # "", sg, pl, near, far


@dataclass(frozen=True)
class Article:
    pass


@dataclass(frozen=True)
class Optional:
    items: tuple


@dataclass(frozen=True)
class Choice:
    options: tuple  # tuple of item tuples


# --- expanded pieces -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    text: str | None  # None for a demonstrative or article still to resolve
    kind: str = "word"  # word | slot | dem | article
    slot: str = ""
    term: str = ""
    form: str = ""
    number: str = ""  # sg | pl for noun pieces
    restrict: str = ""


def parse_template(text: str, where: str = "template") -> tuple:
    """Parse a template into items; a clear error for unbalanced brackets or unknown slot forms."""
    tokens = _TOKEN.findall(text)
    position = 0

    def sequence(closers: tuple[str, ...]) -> tuple[tuple, str | None]:
        nonlocal position
        items: list = []
        while position < len(tokens):
            token = tokens[position]
            position += 1
            if token in closers:
                return tuple(items), token
            if token == "(":
                inner, end = sequence((")",))
                if end != ")":
                    raise LexiconInputError(f"{where}: '(' without ')' in {text!r}")
                items.append(Optional(inner))
            elif token == "{":
                options = []
                while True:
                    inner, end = sequence(("|", "}"))
                    options.append(inner)
                    if end == "}":
                        break
                    if end is None:
                        raise LexiconInputError(f"{where}: '{{' without '}}' in {text!r}")
                items.append(Choice(tuple(options)))
            elif token in ("[", "]"):
                raise LexiconInputError(f"{where}: unbalanced {token!r} in {text!r}")
            elif token in (")", "}", "|"):
                raise LexiconInputError(f"{where}: unexpected {token!r} in {text!r}")
            elif token.startswith("["):
                items.append(_slot(token[1:-1].strip(), where, text))
            else:
                items.append(Word(token.lower()))
        return tuple(items), None

    items, end = sequence(())
    if end is not None:
        raise LexiconInputError(f"{where}: unexpected {end!r} in {text!r}")
    return items


def _slot(body: str, where: str, text: str):
    name, _, forms = body.partition(":")
    name, forms = name.strip().lower(), forms.strip()
    if not name:
        raise LexiconInputError(f"{where}: empty slot [] in {text!r}")
    if name == "this":
        if forms.lower() not in DEM_RESTRICTIONS:
            raise LexiconInputError(f"{where}: [this:{forms}] must be one of {sorted(k for k in DEM_RESTRICTIONS if k)}")
        return Demonstrative(forms.lower())
    if name in ("a", "an"):
        return Article()
    wanted = tuple(f.strip() for f in re.split(r"[+|]", forms) if f.strip()) if forms else ()
    allowed = {*VERB_FORMS, *NOUN_FORMS, "noun", "lemma"}
    bad = [f for f in wanted if f not in allowed]
    if bad:
        raise LexiconInputError(f"{where}: slot [{body}] has unknown forms {bad}; use {sorted(allowed)}")
    return Slot(name, wanted)


def _inflect(word: str, tag: str) -> str:
    if tag in ("VB", "NN"):
        return word
    forms = pyinflect.getInflection(word, tag) or pyinflect.getInflection(word, tag, inflect_oov=True)
    return forms[0] if forms and forms[0] else word


def term_forms(term: Term, wanted: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(text, form, number) of a term in the wanted forms (all forms of its part of speech if none)."""
    words = term.term.split(" ")
    if term.pos == "verb":
        tags = wanted or VERB_FORMS
        out = []
        for tag in tags:
            if tag == "noun":
                if term.noun:
                    out.append((term.noun, "noun", ""))
                continue
            if tag == "lemma":
                out.append((term.term, "lemma", ""))
                continue
            if tag not in VERB_FORMS:
                continue
            out.append((" ".join([_inflect(words[0], tag), *words[1:]]), tag, ""))
    elif term.pos == "noun":
        numbers = {"both": ("sg", "pl"), "sg": ("sg",), "pl": ("pl",)}[term.number]
        tags = wanted or NOUN_FORMS
        out = []
        for tag in tags:
            if tag == "lemma":
                out.append((term.term, "lemma", "sg" if "sg" in numbers else "pl"))
                continue
            number = {"NN": "sg", "NNS": "pl"}.get(tag)
            if number is None or number not in numbers:
                continue
            # A plural-only noun ("data", number pl) is written as listed.
            text = term.term if term.number == "pl" else " ".join([*words[:-1], _inflect(words[-1], tag)])
            out.append((text, tag, number))
    else:
        out = [(term.term, "lemma", "")]
    seen, unique = set(), []
    for item in out:
        if item[0] not in seen:
            seen.add(item[0])
            unique.append(item)
    return unique


def _expand_items(items: tuple, terms: dict[str, list[Term]], where: str) -> list[tuple[Piece, ...]]:
    results: list[tuple[Piece, ...]] = [()]
    for item in items:
        if isinstance(item, Word):
            options = [(Piece(item.text),)]
        elif isinstance(item, Demonstrative):
            options = [(Piece(None, "dem", restrict=item.restrict),)]
        elif isinstance(item, Article):
            options = [(Piece(None, "article"),)]
        elif isinstance(item, Optional):
            options = [(), *_expand_items(item.items, terms, where)]
        elif isinstance(item, Choice):
            options = [seq for option in item.options for seq in _expand_items(option, terms, where)]
        else:  # Slot
            if item.name not in terms:
                raise LexiconInputError(f"{where}: slot [{item.name}] has no term list terms/{item.name}.tsv")
            options = [
                (Piece(text, "slot", item.name, t.term, form, number),)
                for t in terms[item.name]
                for text, form, number in term_forms(t, item.forms)
            ]
        results = [a + b for a in results for b in options]
    return results


def _resolve(pieces: tuple[Piece, ...]) -> list[tuple[Piece, ...]]:
    """Choose demonstratives (agreeing with the next noun) and articles (a/an by the next word)."""
    choices: list[list[Piece]] = []
    for i, piece in enumerate(pieces):
        if piece.kind != "dem":
            choices.append([piece])
            continue
        number = next((p.number for p in pieces[i + 1:] if p.number), "")
        words = DEMONSTRATIVES[number] if number else (*DEMONSTRATIVES["sg"], *DEMONSTRATIVES["pl"])
        allowed = DEM_RESTRICTIONS[piece.restrict]
        words = [w for w in words if allowed is None or w in allowed]
        choices.append([Piece(w, "dem", "this", w, "dem", number, piece.restrict) for w in words])
    out = []
    for combo in itertools.product(*choices):
        combo = list(combo)
        for i, piece in enumerate(combo):
            if piece.kind == "article":
                following = next((p.text for p in combo[i + 1:] if p.text), "")
                combo[i] = Piece("an" if following[:1] in "aeiou" and following else "a", "article", "a", "a", "article")
        out.append(tuple(combo))
    return out


def expand_template(template: Template, terms: dict[str, list[Term]]) -> list[Candidate]:
    """Every candidate marker of one template, each with its template and fillers in provenance."""
    where = f"templates.tsv {template.id}"
    items = parse_template(template.template, where)
    out: list[Candidate] = []
    seen: set[str] = set()
    for raw in _expand_items(items, terms, where):
        for pieces in _resolve(raw):
            marker = normalise_marker(" ".join(p.text for p in pieces if p.text))
            if not marker or marker in seen:
                continue
            seen.add(marker)
            fillers = {p.slot: p.term for p in pieces if p.kind in ("slot", "dem") and p.slot}
            forms = {p.slot: p.form for p in pieces if p.kind == "slot" and p.form not in ("", "lemma")}
            provenance = {"template": template.id, "pattern": template.template, "fillers": fillers}
            if forms:
                provenance["forms"] = forms
            out.append(Candidate(marker, template.move, "pattern", provenance))
    return out


# --- data files ------------------------------------------------------------------------------------


def read_terms(path: Path | Traversable) -> list[Term]:
    problems, out = [], []
    for line_no, row in read_tsv(path, comments=True, error=LexiconInputError):
        where = f"{path.name}:{line_no}"
        term = " ".join((row.get("term") or "").lower().split())
        pos = (row.get("pos") or "").strip().lower()
        number = (row.get("number") or "").strip().lower() or "both"
        if not term:
            problems.append(f"{where}: empty term")
            continue
        if pos not in POS:
            problems.append(f"{where}: pos {pos!r} must be one of {POS}")
            continue
        if number not in ("both", "sg", "pl"):
            problems.append(f"{where}: number {number!r} must be both, sg or pl")
            continue
        out.append(Term(term, pos, number, " ".join((row.get("noun") or "").lower().split())))
    if problems:
        raise LexiconInputError(f"{path} has {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    return out


def load_patterns(folder: str | Path | Traversable = DEFAULT_PATTERNS_DIR) -> tuple[list[Template], dict[str, list[Term]]]:
    """Read templates.tsv and every terms/*.tsv; checks that each template parses and its slots exist."""
    folder = Path(folder) if isinstance(folder, str) else folder
    templates_file = folder / "templates.tsv"
    if not templates_file.is_file():
        raise LexiconInputError(f"no templates.tsv in pattern folder {folder}")
    term_files = sorted((p for p in (folder / "terms").iterdir() if p.name.endswith(".tsv")), key=lambda p: p.name) \
        if (folder / "terms").is_dir() else []
    terms = {p.name.removesuffix(".tsv"): read_terms(p) for p in term_files}
    templates, problems, ids = [], [], set()
    for line_no, row in read_tsv(templates_file, comments=True, error=LexiconInputError):
        where = f"templates.tsv:{line_no}"
        tid, move, text = row.get("id", ""), row.get("move", "").lower(), row.get("template", "")
        if not tid or not text:
            problems.append(f"{where}: id and template are required")
            continue
        if tid in ids:
            problems.append(f"{where}: duplicate id {tid!r}")
        if move not in MOVES:
            problems.append(f"{where}: move {move!r} must be one of {MOVES}")
        try:
            items = parse_template(text, where)
            missing = sorted(_slots(items) - set(terms))
            if missing:
                problems.append(f"{where}: slots {missing} have no term list under terms/")
        except LexiconInputError as exc:
            problems.append(str(exc))
        ids.add(tid)
        templates.append(Template(tid, move, text, (row.get("note") or "").strip()))
    if problems:
        raise LexiconInputError(f"{templates_file} has {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    return templates, terms


def _slots(items) -> set[str]:
    out: set[str] = set()
    for item in items:
        if isinstance(item, Slot):
            out.add(item.name)
        elif isinstance(item, Optional):
            out |= _slots(item.items)
        elif isinstance(item, Choice):
            for option in item.options:
                out |= _slots(option)
    return out


@dataclass
class Expansion:
    candidates: list[Candidate]
    by_template: dict[str, int] = field(default_factory=dict)  # candidates per template (before cross-template de-dup)
    by_move: dict[str, int] = field(default_factory=dict)  # distinct markers per move
    duplicates: int = 0  # markers a later template produced again


def expand_patterns(folder: str | Path | Traversable = DEFAULT_PATTERNS_DIR, moves: tuple[str, ...] = MOVES, templates: list[str] | None = None) -> Expansion:
    """Expand every template (of the given moves / ids); a marker two templates produce is kept once, first wins."""
    all_templates, terms = load_patterns(folder)
    chosen = [t for t in all_templates if t.move in moves and (templates is None or t.id in templates)]
    if templates is not None:
        unknown = sorted(set(templates) - {t.id for t in all_templates})
        if unknown:
            raise LexiconInputError(f"unknown template ids {unknown}; known: {[t.id for t in all_templates]}")
    result = Expansion([])
    seen: set[tuple[str, str]] = set()
    for template in chosen:
        produced = expand_template(template, terms)
        result.by_template[template.id] = len(produced)
        for c in produced:
            if (c.marker, c.move) in seen:
                result.duplicates += 1
                continue
            seen.add((c.marker, c.move))
            result.candidates.append(c)
    for c in result.candidates:
        result.by_move[c.move] = result.by_move.get(c.move, 0) + 1
    return result
