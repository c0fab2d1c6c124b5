"""k replicas of a TEI corpus that survive de-duplication: the input of the scale runs (issue 28, item 3).

Replica 0 is the corpus itself. Replica i (1 <= i < 676) is every TEI file again, under a new paper id, with
its text varied so that no sentence repeats another replica's while every rule of the pipeline sees the same
structure; each replica then mines about as many pairs as the original, and pools, citations and export get an
input that grows k-fold (an exact copy mines nothing new: mine drops a pair whose (query, gold) text another
pair has).

How a replica's text is varied (``ReplicaText``): in the paragraphs of the abstract and the body, a run of 4 or
more ASCII letters has each letter shifted along the alphabet by ``(i + (i // 26) * position) mod 26``, case
kept (replica 1: "shows" -> "tipxt"). Length, case, digits, spaces and punctuation are unchanged, so sentence
boundaries, bibliography markers' character offsets, citation patterns ("(Smith et al., 2014)" keeps its
shape) and the normalisation's rules see what they saw. Left as they are:

- every word that a shipped lexicon's marker or ordinal contains ("to address this issue", "however",
  "first"), the segmenter's abbreviations, "et al" and the de-hyphenation exceptions: the markers at the
  sentence starts, and the rules that read words, match as before; a shift that would make one of these
  words is not made;
- a whitespace-separated chunk that holds ".", "?" or "!" (abbreviations, sentence ends, numbers, URLs) and
  the chunk after a sentence end (the word a segmenter looks at after a period), and the paragraph's first
  chunk: whatever a segmenter decides at a period, it decides in the same context.

Titles (the paper's and every bibliography entry's) have every ASCII letter shifted, so an entry's title
still equals the cited paper's title within its replica and no other (``citations``' title + year rule);
ACL Anthology ids in the entries (URLs, DOIs) become the replica's ids (``replica_id``), so the id rule
resolves within the replica too. The replica's date is the original's, resolved by the input's date rules,
moved by i days and kept inside its temporal split (``shifted_date``; written as the TEI header's date, which
the replica inputs read with ``date_rules: [source]``): every split grows k-fold.

    python benchmarks/scale_replicas.py --corpus ../shared/corpora/acl-emnlp-2014-2018-grobid-tei.tar.gz \\
        --out /work/data/scale/tei --replicas 16 --processes 2
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import re
import shutil
import sys
import tarfile
import time
from contextlib import nullcontext
from functools import lru_cache
from multiprocessing import Pool
from pathlib import Path

from lxml import etree

REPO = Path(__file__).resolve().parents[1]
MAX_REPLICAS = 26 * 26
MIN_VARIED_LETTERS = 4

_TEI = "{http://www.tei-c.org/ns/1.0}"
_NS = {"tei": _TEI[1:-1]}
_SKIP_INLINE = {f"{_TEI}{tag}" for tag in ("formula", "note", "figure", "table")}  # as the TEI reader skips them
_LETTERS = re.compile(r"[A-Za-z]+")
# An ACL Anthology id inside a URL or a DOI: old style (P14-1001) or new style (2020.acl-main.1).
_ACL_ID = re.compile(r"(?<![A-Za-z0-9.])(?:[A-Z]\d{2}-\d{4}|(?:19|20)\d\d\.[a-z0-9]+-[a-z0-9]+\.\d+)(?!\d)")


def protected_words(lexicons: tuple[str, ...] = ("v1", "v2")) -> frozenset[str]:
    """Lowercase words a replica keeps: those of the lexicons' markers and ordinals, the segmenter's
    abbreviations, "et al", and the words the de-hyphenation rule leaves hyphens before."""
    from ratio_spark.core.text import DEHYPHENATE_PATTERN
    from ratio_spark.lexicon.loader import load_lexicon
    from ratio_spark.pipeline.settings import SegmentConfig

    words: set[str] = {"et", "al"}
    for name in lexicons:
        lexicon = load_lexicon(name)
        for text in [m.text for m in lexicon.markers] + list(lexicon.ordinals):
            words.update(w.lower() for w in _LETTERS.findall(text))
    for abbreviation in SegmentConfig().abbreviations:
        words.update(w.lower() for w in _LETTERS.findall(abbreviation))
    words.update(w.lower() for w in _LETTERS.findall(DEHYPHENATE_PATTERN))
    return frozenset(words)


def _shift_letters(run: str, replica: int) -> str:
    """Each ASCII letter of ``run`` moved ``replica % 26 + (replica // 26) * position`` places, case kept."""
    step, slope = replica % 26, replica // 26
    out = []
    for position, char in enumerate(run):
        base = 97 if char >= "a" else 65
        out.append(chr(base + (ord(char) - base + step + slope * position) % 26))
    return "".join(out)


def _line_break_join() -> str:
    """Where the reader joins a word broken by a line-break hyphen (``core.text.DEHYPHENATE_PATTERN``, over the
    raw text's whitespace): "how- ever", not "end- to-end"."""
    from ratio_spark.core.text import DEHYPHENATE_PATTERN

    return DEHYPHENATE_PATTERN.replace("- ", r"-\s+", 1)


# The parts of a paragraph. A chunk is a run of non-spaces; a line-break hyphen that the reader joins does not
# end one. Kept as they are: a chunk holding a sentence end with the chunk after it (more if they hold one
# too), and the paragraph's first chunk; a run of letters elsewhere (a word, joined as the reader joins it)
# may vary.
_JOIN = _line_break_join()
_ENDING = rf"(?:[A-Za-z]+{_JOIN})*\S*[.?!]\S*"
_ANY = rf"\S+?(?:{_JOIN}\S+?)*(?!\S)"
_KEPT_AFTER_AN_END = rf"{_ENDING}(?:\s+{_ENDING})*(?:\s+{_ANY})?"
_PARAGRAPH_PARTS = re.compile(
    rf"(?P<kept>^\s*(?:{_KEPT_AFTER_AN_END}|{_ANY})|{_KEPT_AFTER_AN_END})"
    rf"|(?<![A-Za-z])(?P<run>[A-Za-z]+(?:{_JOIN}[A-Za-z]+)*)"
)
_LINE_BREAK = re.compile(_JOIN)


class ReplicaText:
    """The text of replica ``replica`` (0: the corpus as it is); each word's variation is computed once."""

    def __init__(self, replica: int, protected: frozenset[str]):
        if not 0 <= replica < MAX_REPLICAS:
            raise ValueError(f"a replica number is between 0 and {MAX_REPLICAS - 1}, not {replica}")
        self.replica, self.protected = replica, protected
        self._words: dict[str, str] = {}
        self._runs: dict[str, str] = {}

    def _word(self, run: str) -> str:
        """A run of letters (perhaps broken by line-break hyphens), judged and shifted as the word it joins to."""
        varied = self._words.get(run)
        if varied is None:
            word = re.sub(r"-\s+", "", run)
            varied = run
            if len(word) >= MIN_VARIED_LETTERS and word.lower() not in self.protected:
                shifted = _shift_letters(word, self.replica)
                letters = iter(shifted)
                candidate = re.sub("[A-Za-z]", lambda _: next(letters), run)
                # Not into a protected word, and not into a part the reader would join differently ("xy- to").
                if shifted.lower() not in self.protected and \
                        len(_LINE_BREAK.findall(candidate)) == len(_LINE_BREAK.findall(run)):
                    varied = candidate
            self._words[run] = varied
        return varied

    def _part(self, match: re.Match) -> str:
        run = match.group("run")
        return self._word(run) if run else match.group()

    def paragraph(self, text: str) -> str:
        """The same length and structure, the letters of most words shifted (the module docstring's rules)."""
        return _PARAGRAPH_PARTS.sub(self._part, text) if self.replica else text

    def _run(self, match: re.Match) -> str:
        run = match.group()
        varied = self._runs.get(run)
        if varied is None:
            varied = self._runs[run] = _shift_letters(run, self.replica)
        return varied

    def title(self, text: str) -> str:
        """Every ASCII letter shifted: an entry's title and the cited paper's title stay equal (case-insensitively,
        whatever their punctuation) within a replica and differ from every other replica's."""
        return _LETTERS.sub(self._run, text) if self.replica else text


def replica_id(paper_id: str, replica: int) -> str:
    """The paper id of ``paper_id`` in replica ``replica``: still an ACL Anthology id, so that the date and id
    rules read it (P14-1001 -> 2014.r3-p14.1001, 2020.acl-main.1 -> 2020.r3acl-main.1; a version suffix is
    kept); another id gets ``~r<replica>``. Replica 0 keeps the id."""
    if replica == 0:
        return paper_id
    old = re.fullmatch(r"([A-Z])(\d{2})-(\d{4})(v\d+(?:\.\d+)*)?", paper_id)
    if old:
        letter, yy, number, version = old.groups()
        century = 1900 if int(yy) >= 50 else 2000
        return f"{century + int(yy)}.r{replica}-{letter.lower()}{yy}.{number}{version or ''}"
    new = re.fullmatch(r"((?:19|20)\d\d)\.([a-z0-9]+)-([a-z0-9]+)\.(\d+)(v\d+(?:\.\d+)*)?", paper_id)
    if new:
        year, venue, volume, number, version = new.groups()
        return f"{year}.r{replica}{venue}-{volume}.{number}{version or ''}"
    return f"{paper_id}~r{replica}"


def replica_ids_in(text: str, replica: int) -> str:
    """Every ACL Anthology id in ``text`` (a URL, a DOI) as the replica's id."""
    return _ACL_ID.sub(lambda m: replica_id(m.group(), replica), text) if replica else text


def shifted_date(date: dt.date, replica: int, splits) -> dt.date:
    """``date`` moved ``replica`` days later (or earlier, or not at all) so that it stays in its split
    (``splits``: name -> range with start/end, e.g. ``SplitsConfig.ranges()``)."""

    def split_of(day: dt.date) -> str | None:
        return next((name for name, r in splits.items() if r.start <= day <= r.end), None)

    home = split_of(date)
    for candidate in (date + dt.timedelta(days=replica), date - dt.timedelta(days=replica)):
        if split_of(candidate) == home:
            return candidate
    return date


# --- one TEI file -------------------------------------------------------------------------------------------


def _text_slots(element: etree._Element) -> list[tuple[etree._Element, str]]:
    """(node, "text" | "tail") in the order the TEI reader joins them (``tei._raw_text``)."""
    slots: list[tuple[etree._Element, str]] = []

    def walk(node: etree._Element) -> None:
        if node.text and node.tag not in _SKIP_INLINE:
            slots.append((node, "text"))
        for child in node:
            if child.tag not in _SKIP_INLINE:
                walk(child)
            if child.tail:
                slots.append((child, "tail"))

    walk(element)
    return slots


def _rewrite(element: etree._Element, change) -> None:
    """Apply ``change`` (length-preserving) to the element's joined text, then put each part back in its node."""
    slots = _text_slots(element)
    parts = [getattr(node, attr) for node, attr in slots]
    changed = change("".join(parts))
    start = 0
    for (node, attr), part in zip(slots, parts):
        setattr(node, attr, changed[start:start + len(part)])
        start += len(part)


def _original_date(root: etree._Element, paper_id: str, rules: list[str], min_year: int, max_year: int):
    from ratio_spark.pipeline.ingest.dates import resolve_date

    candidates = []
    for date_el in root.iterfind(".//tei:teiHeader/tei:fileDesc/tei:publicationStmt/tei:date", _NS):
        if date_el.get("when"):
            candidates.append(("tei_header_when", date_el.get("when")))
        candidates.append(("tei_header_text", " ".join("".join(date_el.itertext()).split())))
    date, _, _ = resolve_date(candidates, paper_id, rules, min_year, max_year)
    return date["pub_date"] if date else None


def _set_header_date(root: etree._Element, date: dt.date | None) -> None:
    """The header's publication date: ``date`` alone (none when the original had no usable date)."""
    statements = root.findall(".//tei:teiHeader/tei:fileDesc/tei:publicationStmt", _NS)
    for statement in statements:
        for old in statement.findall("tei:date", _NS):
            statement.remove(old)
    if date is not None and statements:
        element = etree.SubElement(statements[0], f"{_TEI}date", type="published", when=date.isoformat())
        element.text = date.isoformat()


def vary_tei(data: bytes, paper_id: str, text: ReplicaText, *, date_rules: list[str], splits,
             min_year: int = 1900, max_year: int = 2100) -> bytes:
    """One TEI file as replica ``text.replica`` (the module docstring's rules); a file lxml cannot parse comes
    back unchanged (the reader rejects it as it rejects the original)."""
    replica = text.replica
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, collect_ids=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        return data
    date = _original_date(root, paper_id, date_rules, min_year, max_year)
    paragraphs = [*root.iterfind(".//tei:teiHeader//tei:abstract//tei:p", _NS),
                  *(p for div in root.iterfind(".//tei:text/tei:body//tei:div", _NS) for p in div.findall("tei:p", _NS))]
    for paragraph in dict.fromkeys(paragraphs):  # a paragraph once, even if two paths reach it
        _rewrite(paragraph, text.paragraph)
    for title in root.iterfind(".//tei:title", _NS):
        _rewrite(title, text.title)
    for struct in root.iterfind(".//tei:listBibl/tei:biblStruct", _NS):
        for idno in struct.iterfind(".//tei:idno", _NS):
            _rewrite(idno, lambda ids: replica_ids_in(ids, replica))
        for pointer in struct.iterfind(".//tei:ptr", _NS):
            if pointer.get("target"):
                pointer.set("target", replica_ids_in(pointer.get("target"), replica))
    _set_header_date(root, shifted_date(date, replica, splits) if date else None)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


# --- the corpus ---------------------------------------------------------------------------------------------


def _replica_name(name: str, replica: int) -> str:
    from ratio_spark.pipeline.ingest.dates import paper_id_from_path

    stem = paper_id_from_path(name)
    return replica_id(stem, replica) + name[len(stem):]


@lru_cache(maxsize=None)
def _replica_text(replica: int) -> ReplicaText:
    """One per replica in each worker of ``prepare``'s pool, so each word is varied once per worker."""
    return ReplicaText(replica, protected_words())


@lru_cache(maxsize=1)
def _settings(conf: str) -> tuple:
    from ratio_spark.config import load_config

    config = load_config(conf)
    source = config.inputs[0]
    return source.date_rules, source.exclude_path_regex, config.splits.ranges(), config.ingest.min_year, config.ingest.max_year


def _write_replica(task: tuple[str, str, int, str]) -> int:
    """One file of one replica (a worker of ``prepare``'s pool); returns the bytes written."""
    from ratio_spark.pipeline.ingest.dates import canonical_paper_id, paper_id_from_path

    source, target_folder, replica, conf = task
    rules, _, splits, min_year, max_year = _settings(conf)
    name = Path(source).name
    data = Path(source).read_bytes()
    if name.endswith(".gz"):  # written plain, as a replica is read once
        data, name = gzip.decompress(data), name[: -len(".gz")]
    data = vary_tei(data, canonical_paper_id(paper_id_from_path(name)), _replica_text(replica),
                    date_rules=rules, splits=splits, min_year=min_year, max_year=max_year)
    target = Path(target_folder) / _replica_name(name, replica)
    target.write_bytes(data)
    return len(data)


def replica_folder(out: Path, replica: int) -> Path:
    return out / f"r{replica:02d}"


def replica_config(config, out: Path, scale: int):
    """``config`` (a ``ratio_spark.config.Config``) reading replicas 0..``scale``-1 of ``out``: replica 0 as ``config``'s
    first input reads the corpus, each other one from its header date (``date_rules: [source]``)."""
    from ratio_spark.pipeline.settings import InputConfig

    source = config.inputs[0]
    inputs = [source.model_copy(update={"path": str(replica_folder(out, 0))})]
    if not replica_folder(out, 0).is_dir():
        raise ValueError(f"{out} holds no replicas: run benchmarks/scale_replicas.py --out {out} first")
    for replica in range(1, scale):
        if not (replica_folder(out, replica) / ".done").exists():
            raise ValueError(f"{out} has no replica {replica}: run benchmarks/scale_replicas.py --replicas {scale}")
        inputs.append(InputConfig(**{**source.model_dump(), "name": f"{source.name}-r{replica}",
                                     "path": str(replica_folder(out, replica)), "date_rules": ["source"],
                                     "exclude_path_regex": None}))
    return config.model_copy(update={"inputs": inputs})


def prepare(corpus: Path, out: Path, replicas: int, conf: Path, processes: int) -> dict:
    """Extract the corpus as replica 0 and write replicas 1..``replicas``-1 beside it (existing ones are kept)."""
    if not 1 <= replicas <= MAX_REPLICAS:
        raise ValueError(f"--replicas must be between 1 and {MAX_REPLICAS}, got {replicas}")
    original = replica_folder(out, 0)
    if not original.is_dir():
        scratch = out / ".extracting"
        shutil.rmtree(scratch, ignore_errors=True)
        if corpus.is_dir():
            shutil.copytree(corpus, scratch)
        else:
            scratch.mkdir(parents=True)
            try:
                with tarfile.open(corpus) as archive:
                    archive.extractall(scratch, filter="data")
            except (tarfile.TarError, OSError) as exc:
                shutil.rmtree(scratch, ignore_errors=True)
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ValueError(f"--corpus {corpus}: not a readable tar archive of TEI files ({reason})") from None
        scratch.rename(original)
    _, exclude, *_ = _settings(str(conf))
    files = sorted(p for p in original.rglob("*") if p.is_file())
    kept = [p for p in files if not (exclude and re.search(exclude, str(p)))]  # excluded files are not papers
    report = {"corpus": str(corpus), "files": len(files), "replicated_files": len(kept), "replicas": {}}
    started = time.time()
    with Pool(processes) if processes > 1 else nullcontext() as pool:
        for replica in range(1, replicas):
            folder = replica_folder(out, replica)
            if (folder / ".done").exists():
                continue
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            begun = time.time()
            tasks = [(str(p), str(folder), replica, str(conf)) for p in kept]
            written = sum(pool.imap_unordered(_write_replica, tasks, chunksize=16) if pool else map(_write_replica, tasks))
            (folder / ".done").write_text("")
            report["replicas"][replica] = {"bytes": written, "seconds": round(time.time() - begun, 1)}
            print(f"replica {replica}: {len(kept)} files, {written / 2**20:.0f} MiB, {time.time() - begun:.0f} s",
                  flush=True)
    report["seconds"] = round(time.time() - started, 1)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True, help="a .tar.gz or a folder of TEI files (replica 0)")
    parser.add_argument("--out", type=Path, required=True, help="the folder of the replicas r00, r01, ...")
    parser.add_argument("--replicas", type=int, default=16, help="replicas in all, the corpus included")
    parser.add_argument("--conf", type=Path, default=REPO / "conf" / "acl.yaml",
                        help="the corpus' configuration: its first input's date rules and path rule, its splits")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if not args.corpus.exists():
        parser.error(f"--corpus {args.corpus}: no such file or folder")
    try:
        report = prepare(args.corpus, args.out, args.replicas, args.conf, args.processes)
    except ValueError as exc:
        parser.error(str(exc))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
