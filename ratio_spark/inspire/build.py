"""``ratio-spark inspire build``: Inspire instances from the Delta tables (the paper's §3.2 and A).

For each target paper in the date window: cutoff = target date minus ``cutoff_months``; its resolved
references before the cutoff are antecedent candidates (those on or after it are stored as excluded
concurrent references, those more than ``max_age_years`` before the target as excluded old ones);
candidates are graded into tiers, T0 removed, the rest capped; a target with fewer than
``min_antecedents`` graded antecedents is dropped; the brief is written. Output, under
``<root>/<version>/``:

    instances/<instance_id>.json   policy block (brief, cutoff) + evaluator block (target, tiers, exclusions)
    corpus.parquet                 the search corpus: every paper's id, date, title, abstract (body if indexed)
    manifest.json                  ordered instance ids, SHA-256 of every file, settings, table versions,
                                   prompts, models, code commit, counts at each step (written last)
"""

from __future__ import annotations

import calendar
import datetime as dt
import random
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ratio_spark.core.config import Config
from ratio_spark.inspire import briefs, grading
from ratio_spark.inspire.data import Paper, papers_from_rows, read_rows, table_version
from ratio_spark.inspire.manifest import code_commit, now_utc, sha256_bytes, sha256_file, sha256_json, write_json

REFERENCE_COLUMNS = ["paper_id", "entry_idx", "entry_id", "resolved_paper_id", "resolved_pub_date",
                     "resolution_status", "mention_count", "mention_sections", "mention_sentence_ids"]
CORPUS_FILE = "corpus.parquet"
MANIFEST_FILE = "manifest.json"


def months_before(date: dt.date, months: int) -> dt.date:
    """``date`` minus ``months`` calendar months (the day clamped to the month's length)."""
    index = date.year * 12 + date.month - 1 - months
    year, month = divmod(index, 12)
    return dt.date(year, month + 1, min(date.day, calendar.monthrange(year, month + 1)[1]))


def instance_id(version: str, target_id: str) -> str:
    """An id that names the instance without naming the target (the policy sees it)."""
    return "insp-" + sha256_bytes(f"{version}:{target_id}".encode())[:12]


def select_targets(papers: list[Paper], config, counts: Counter) -> list[Paper]:
    window = [p for p in papers if config.start <= p.pub_date <= config.end]
    counts["targets_in_date_window"] = len(window)
    excluded = re.compile(config.exclude_title_regex)
    kept = [p for p in window if not excluded.search(p.title or "")]
    counts["targets_excluded_by_title"] = len(window) - len(kept)
    if config.max_targets is not None and len(kept) > config.max_targets:
        kept = sorted(random.Random(config.seed).sample(kept, config.max_targets), key=lambda p: p.paper_id)
    counts["targets_considered"] = len(kept)
    return kept


def abstract_sentences(rows: pa.Table) -> dict[str, list[str]]:
    """paper id -> the sentences of its Abstract section (section 0), in order."""
    out: dict[str, list[tuple]] = defaultdict(list)
    for row in rows.to_pylist():
        if row["section_idx"] == 0 and row["section_heading"] == "Abstract":
            out[row["paper_id"]].append((row["para_idx"], row["sent_idx"], row["text"]))
    return {pid: [t for *_, t in sorted(items)] for pid, items in out.items()}


def _cited_entry(paper: grading.CitedPaper, papers: dict[str, Paper], config) -> dict[str, Any]:
    source = papers.get(paper.paper_id)
    method = re.compile(config.grading.method_heading_regex)
    return {
        "paper_id": paper.paper_id, "title": source.title if source else None, "pub_date": str(paper.pub_date),
        "tier": paper.tier, "gain": config.grading.gains.get(paper.tier, 0.0), "mention_count": paper.mention_count,
        "method_mentions": paper.method_mentions(method), "entry_ids": paper.entry_ids, "grader": paper.grader,
        "role": paper.role, "rationale": paper.rationale,
    }


def build_instances(config: Config, client=None, *, log=print) -> dict[str, Any]:
    """Write a versioned instance folder; return the manifest. ``client``: an LLMClient, needed only
    when grading or briefs use an LLM."""
    ic = config.inspire
    counts: Counter = Counter()
    locations = {name: config.tables.location(name) for name in ("papers", "references", "sentences")}
    index_body = "body" in ic.search.fields
    log(f"inspire build: reading papers from {locations['papers']}")
    papers = papers_from_rows(read_rows(locations["papers"], "papers", ["paper_id", "title", "pub_date", "sections"]),
                              ic.search.max_body_chars if index_body else 0)
    by_id = {p.paper_id: p for p in papers}
    counts["corpus_papers"] = len(papers)
    targets = select_targets(papers, ic.targets, counts)
    target_ids = [t.paper_id for t in targets]
    references = read_rows(locations["references"], "references", REFERENCE_COLUMNS, target_ids).to_pylist()
    sentence_rows = read_rows(locations["sentences"], "sentences",
                              ["paper_id", "sentence_id", "section_idx", "section_heading", "para_idx", "sent_idx", "text"],
                              target_ids)
    abstracts = abstract_sentences(sentence_rows)
    contexts = dict(zip(sentence_rows.column("sentence_id").to_pylist(), sentence_rows.column("text").to_pylist()))
    per_target: dict[str, list[dict]] = defaultdict(list)
    for row in references:
        counts["target_bibliography_entries"] += 1
        counts[f"target_entries_{row['resolution_status']}"] += 1
        if row["resolution_status"] == "resolved":
            per_target[row["paper_id"]].append(row)

    # Antecedent candidates per target: before the cutoff and not too old.
    plans = []
    for target in targets:
        cutoff = months_before(target.pub_date, ic.cutoff_months)
        oldest = months_before(target.pub_date, 12 * ic.max_age_years) if ic.max_age_years is not None else None
        cited = grading.merge_entries(per_target.get(target.paper_id, []))
        counts["cited_corpus_papers"] += len(cited)
        concurrent = [c for c in cited if c.pub_date >= cutoff]
        old = [c for c in cited if c.pub_date < cutoff and oldest is not None and c.pub_date < oldest]
        candidates = [c for c in cited if c.pub_date < cutoff and (oldest is None or c.pub_date >= oldest)]
        counts["excluded_concurrent"] += len(concurrent)
        counts["excluded_old"] += len(old)
        counts["antecedent_candidates"] += len(candidates)
        grading.grade_by_rule(candidates, ic.grading)
        plans.append((target, cutoff, candidates, concurrent, old))

    if ic.grading.grader == "llm":
        requests, owners = [], []
        for target, _, candidates, _, _ in plans:
            requests += grading.grading_requests(target, candidates, by_id, contexts)
            owners += candidates
        log(f"inspire build: grading {len(requests)} references with {ic.grading.model}")
        results = client.complete_json(requests, ic.grading.model, progress="grading")
        counts["llm_grades_failed_rule_used"] = grading.apply_llm_grades(owners, results, ic.grading)

    kept = []
    for target, cutoff, candidates, concurrent, old in plans:
        antecedents = grading.select_antecedents(candidates, ic.grading)
        counts["graded_t0_removed"] += sum(1 for c in candidates if c.tier == 0)
        counts["graded_over_cap"] += sum(1 for c in candidates if c.tier >= 1) - len(antecedents)
        if len(antecedents) < ic.grading.min_antecedents:
            counts[f"dropped_fewer_than_{ic.grading.min_antecedents}_antecedents"] += 1
            continue
        kept.append((target, cutoff, antecedents, concurrent, old))

    brief_texts: dict[str, tuple[str | None, str]] = {}
    for target, *_ in kept:
        brief_texts[target.paper_id] = (briefs.extractive_brief(abstracts.get(target.paper_id, []), ic.brief), "extractive")
    if ic.brief.mode == "llm":
        log(f"inspire build: writing {len(kept)} briefs with {ic.brief.model}")
        results = client.complete_json(briefs.brief_requests([k[0] for k in kept], ic.brief), ic.brief.model,
                                       progress="briefs")
        for (target, *_), result in zip(kept, results):
            text = " ".join(result.data["brief"].split()) if result.data else ""
            if len(text.split()) >= ic.brief.min_brief_words:
                brief_texts[target.paper_id] = (text, f"llm:{result.model}")
            else:
                counts["llm_briefs_failed_extractive_used"] += 1
                brief_texts[target.paper_id] = (brief_texts[target.paper_id][0], "extractive_fallback")

    out = Path(ic.root) / ic.version
    if out.exists():
        shutil.rmtree(out)  # a version folder is rebuilt whole: no stale instance survives a rerun
    (out / "instances").mkdir(parents=True)
    instance_files: dict[str, dict] = {}
    order = []
    for target, cutoff, antecedents, concurrent, old in kept:
        brief, source = brief_texts[target.paper_id]
        if brief is None:
            counts["dropped_no_brief"] += 1
            continue
        overlap = briefs.title_overlap(brief, target.title)
        iid = instance_id(ic.version, target.paper_id)
        document = {
            "instance_id": iid,
            "version": ic.version,
            "policy": {"brief": brief, "cutoff": str(cutoff)},
            "evaluator": {
                "target": {"paper_id": target.paper_id, "title": target.title, "pub_date": str(target.pub_date)},
                "antecedents": [_cited_entry(a, by_id, ic) for a in antecedents],
                "excluded_concurrent": [_cited_entry(c, by_id, ic) for c in concurrent],
                "excluded_old": [_cited_entry(c, by_id, ic) for c in old],
                "brief": {"source": source, "title_overlap": overlap, "flagged": overlap >= ic.brief.flag_title_overlap},
            },
        }
        instance_files[iid] = {"file": f"instances/{iid}.json", "sha256": write_json(out / "instances" / f"{iid}.json", document)}
        order.append(iid)
        counts["instances"] += 1
        counts["flagged_briefs"] += int(document["evaluator"]["brief"]["flagged"])
        for a in antecedents:
            counts[f"antecedents_t{a.tier}"] += 1

    corpus = pa.table({
        "paper_id": [p.paper_id for p in papers],
        "pub_date": pa.array([p.pub_date for p in papers], pa.date32()),
        "title": [p.title for p in papers],
        "abstract": [p.abstract for p in papers],
        "body": [p.body for p in papers],
    })
    pq.write_table(corpus, out / CORPUS_FILE)
    manifest = {
        "version": ic.version,
        "created_at": now_utc(),
        "code_commit": code_commit(),
        "settings": ic.model_dump(mode="json", exclude={"agent", "scoring"}),
        "settings_sha256": sha256_json(ic.model_dump(mode="json", exclude={"agent", "scoring"})),
        "tables": {name: {"location": loc, "version": table_version(loc, name)} for name, loc in locations.items()},
        "prompts": {
            "brief": {"file": briefs.BRIEF_PROMPT, "sha256": sha256_file(briefs.PROMPTS_DIR / briefs.BRIEF_PROMPT)},
            "grader": {"file": grading.GRADE_PROMPT, "sha256": sha256_file(grading.PROMPTS_DIR / grading.GRADE_PROMPT)},
        },
        "models": _models(config),
        "splits": {"eval": order},
        "instances": instance_files,
        "corpus": {"file": CORPUS_FILE, "sha256": sha256_file(out / CORPUS_FILE), "papers": len(papers),
                   "fields": ic.search.fields},
        "counts": dict(sorted(counts.items())),
    }
    write_json(out / MANIFEST_FILE, manifest)
    log(f"inspire build: {len(order)} instances in {out}")
    return manifest


def _models(config: Config) -> dict[str, Any]:
    """The endpoints (name and model id) that graded and wrote briefs, when an LLM did."""
    ic = config.inspire
    used = {"grader": ic.grading.model if ic.grading.grader == "llm" else None,
            "brief": ic.brief.model if ic.brief.mode == "llm" else None}
    endpoints = {m.name: m for m in config.llm.models}
    return {role: ({"endpoint": name, "model": endpoints[name].model if name in endpoints else None} if name else None)
            for role, name in used.items()}
