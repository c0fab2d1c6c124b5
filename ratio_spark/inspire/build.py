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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ratio_spark.inspire import briefs, grading
from ratio_spark.evaluation.tables import table_version
from ratio_spark.inspire.data import Paper, papers_from_rows, read_rows
from ratio_spark.inspire.manifest import code_commit, now_utc, sha256_bytes, sha256_file, sha256_json, write_json
from ratio_spark.inspire.settings import InspireConfig

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


@dataclass
class TargetPlan:
    """One target on its way to an instance: its cutoff and its cited corpus papers, sorted by date."""

    target: Paper
    cutoff: dt.date
    candidates: list[grading.CitedPaper]  # before the cutoff and recent enough: graded
    concurrent: list[grading.CitedPaper]  # on or after the cutoff: stored, never labelled
    old: list[grading.CitedPaper]  # more than max_age_years before the target: stored, never labelled
    antecedents: list[grading.CitedPaper] = field(default_factory=list)
    brief: str | None = None
    brief_source: str = "extractive"


def plan_target(target: Paper, resolved_rows: list[dict], ic, counts: Counter) -> TargetPlan:
    cutoff = months_before(target.pub_date, ic.cutoff_months)
    oldest = months_before(target.pub_date, 12 * ic.max_age_years) if ic.max_age_years is not None else dt.date.min
    cited = grading.merge_entries(resolved_rows)
    plan = TargetPlan(target, cutoff, [c for c in cited if oldest <= c.pub_date < cutoff],
                      [c for c in cited if c.pub_date >= cutoff], [c for c in cited if c.pub_date < min(oldest, cutoff)])
    counts["cited_corpus_papers"] += len(cited)
    counts["excluded_concurrent"] += len(plan.concurrent)
    counts["excluded_old"] += len(plan.old)
    counts["antecedent_candidates"] += len(plan.candidates)
    grading.grade_by_rule(plan.candidates, ic.grading)
    return plan


def grade_with_llm(plans: list[TargetPlan], papers: dict[str, Paper], contexts: dict[str, str], ic, client,
                   counts: Counter, log) -> None:
    requests, owners = [], []
    for plan in plans:
        requests += grading.grading_requests(plan.target, plan.candidates, papers, contexts)
        owners += plan.candidates
    log(f"inspire build: grading {len(requests)} references with {ic.grading.model}")
    results = client.complete_json(requests, ic.grading.model, progress="grading")
    counts["llm_grades_failed_rule_used"] = grading.apply_llm_grades(owners, results, ic.grading)


def keep_graded(plans: list[TargetPlan], ic, counts: Counter) -> list[TargetPlan]:
    """Graded antecedents (T0 removed, capped); targets with too few of them dropped."""
    kept = []
    for plan in plans:
        plan.antecedents = grading.select_antecedents(plan.candidates, ic.grading)
        counts["graded_t0_removed"] += sum(1 for c in plan.candidates if c.tier == 0)
        counts["graded_over_cap"] += sum(1 for c in plan.candidates if c.tier >= 1) - len(plan.antecedents)
        if len(plan.antecedents) < ic.grading.min_antecedents:
            counts[f"dropped_fewer_than_{ic.grading.min_antecedents}_antecedents"] += 1
        else:
            kept.append(plan)
    return kept


def write_briefs(plans: list[TargetPlan], abstracts: dict[str, list[str]], ic, client, counts: Counter, log) -> None:
    """The extractive brief of every plan; with brief.mode llm, the LLM's, the extractive one as fallback."""
    for plan in plans:
        plan.brief = briefs.extractive_brief(abstracts.get(plan.target.paper_id, []), ic.brief)
    if ic.brief.mode != "llm":
        return
    log(f"inspire build: writing {len(plans)} briefs with {ic.brief.model}")
    results = client.complete_json(briefs.brief_requests([p.target for p in plans], ic.brief), ic.brief.model,
                                   progress="briefs")
    for plan, result in zip(plans, results):
        text = " ".join(result.data["brief"].split()) if result.data else ""
        if len(text.split()) >= ic.brief.min_brief_words:
            plan.brief, plan.brief_source = text, f"llm:{result.model}"
        else:
            counts["llm_briefs_failed_extractive_used"] += 1
            plan.brief_source = "extractive_fallback"


def instance_document(plan: TargetPlan, iid: str, papers: dict[str, Paper], ic) -> dict[str, Any]:
    """The instance file: what the policy sees, and what only the evaluator sees."""
    method = re.compile(ic.grading.method_heading_regex)

    def entries(cited: list[grading.CitedPaper]) -> list[dict[str, Any]]:
        return [{
            "paper_id": c.paper_id, "title": papers[c.paper_id].title if c.paper_id in papers else None,
            "pub_date": str(c.pub_date), "tier": c.tier, "gain": ic.grading.gains.get(c.tier, 0.0),
            "mention_count": c.mention_count, "method_mentions": c.method_mentions(method), "entry_ids": c.entry_ids,
            "grader": c.grader, "role": c.role, "rationale": c.rationale,
        } for c in cited]

    overlap = briefs.title_overlap(plan.brief, plan.target.title)
    return {
        "instance_id": iid,
        "version": ic.version,
        "policy": {"brief": plan.brief, "cutoff": str(plan.cutoff)},
        "evaluator": {
            "target": {"paper_id": plan.target.paper_id, "title": plan.target.title, "pub_date": str(plan.target.pub_date)},
            "antecedents": entries(plan.antecedents),
            "excluded_concurrent": entries(plan.concurrent),
            "excluded_old": entries(plan.old),
            "brief": {"source": plan.brief_source, "title_overlap": overlap, "flagged": overlap >= ic.brief.flag_title_overlap},
        },
    }


def build_instances(ic: InspireConfig, location: Callable[[str], str], client=None, *, log=print) -> dict[str, Any]:
    """Write a versioned instance folder; return the manifest. ``location``: a table's path by name
    (``config.tables.location``); ``client``: an LLMClient, needed only when grading or briefs use an LLM."""
    counts: Counter = Counter()
    locations = {name: location(name) for name in ("papers", "references", "sentences")}
    log(f"inspire build: reading papers from {locations['papers']}")
    papers = papers_from_rows(read_rows(locations["papers"], "papers", ["paper_id", "title", "pub_date", "sections"]),
                              ic.search.max_body_chars if "body" in ic.search.fields else 0)
    by_id = {p.paper_id: p for p in papers}
    counts["corpus_papers"] = len(papers)
    targets = select_targets(papers, ic.targets, counts)
    target_ids = [t.paper_id for t in targets]
    sentence_rows = read_rows(locations["sentences"], "sentences",
                              ["paper_id", "sentence_id", "section_idx", "section_heading", "para_idx", "sent_idx", "text"],
                              target_ids)
    resolved: dict[str, list[dict]] = defaultdict(list)
    for row in read_rows(locations["references"], "references", REFERENCE_COLUMNS, target_ids).to_pylist():
        counts["target_bibliography_entries"] += 1
        counts[f"target_entries_{row['resolution_status']}"] += 1
        if row["resolution_status"] == "resolved":
            resolved[row["paper_id"]].append(row)

    plans = [plan_target(t, resolved.get(t.paper_id, []), ic, counts) for t in targets]
    if ic.grading.grader == "llm":
        contexts = dict(zip(sentence_rows.column("sentence_id").to_pylist(), sentence_rows.column("text").to_pylist()))
        grade_with_llm(plans, by_id, contexts, ic, client, counts, log)
    kept = keep_graded(plans, ic, counts)
    write_briefs(kept, abstract_sentences(sentence_rows), ic, client, counts, log)

    out = Path(ic.root) / ic.version
    if out.exists():
        shutil.rmtree(out)  # a version folder is rebuilt whole: no stale instance survives a rerun
    (out / "instances").mkdir(parents=True)
    instance_files: dict[str, dict] = {}
    for plan in kept:
        if plan.brief is None:
            counts["dropped_no_brief"] += 1
            continue
        iid = instance_id(ic.version, plan.target.paper_id)
        document = instance_document(plan, iid, by_id, ic)
        instance_files[iid] = {"file": f"instances/{iid}.json", "sha256": write_json(out / "instances" / f"{iid}.json", document)}
        counts["instances"] += 1
        counts["flagged_briefs"] += int(document["evaluator"]["brief"]["flagged"])
        for a in plan.antecedents:
            counts[f"antecedents_t{a.tier}"] += 1
    write_corpus(papers, out / CORPUS_FILE)
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
        "models": _models(ic, client),
        "splits": {"eval": list(instance_files)},
        "instances": instance_files,
        "corpus": {"file": CORPUS_FILE, "sha256": sha256_file(out / CORPUS_FILE), "papers": len(papers),
                   "fields": ic.search.fields},
        "counts": dict(sorted(counts.items())),
    }
    write_json(out / MANIFEST_FILE, manifest)
    log(f"inspire build: {len(instance_files)} instances in {out}")
    return manifest


def write_corpus(papers: list[Paper], path: Path) -> None:
    """The search corpus: every paper, whatever its date (the service applies each episode's cutoff)."""
    pq.write_table(pa.table({
        "paper_id": [p.paper_id for p in papers],
        "pub_date": pa.array([p.pub_date for p in papers], pa.date32()),
        "title": [p.title for p in papers],
        "abstract": [p.abstract for p in papers],
        "body": [p.body for p in papers],
    }), path)


def _models(ic, client) -> dict[str, Any]:
    """The endpoints (name and the model id the client sends) that graded and wrote briefs, when an LLM did."""
    used = {"grader": ic.grading.model if ic.grading.grader == "llm" else None,
            "brief": ic.brief.model if ic.brief.mode == "llm" else None}
    return {role: ({"endpoint": name, "model": client.endpoint(name).model} if name else None)
            for role, name in used.items()}
