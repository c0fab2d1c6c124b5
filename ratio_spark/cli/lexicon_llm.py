"""LLM generation and labelling of lexicon marker candidates (generate | label); see docs/llm.md.

    ratio-spark lexicon-llm generate --conf conf/llm-local.yaml --version v2 --move address --move broaden
    ratio-spark lexicon-llm label    --conf conf/llm-local.yaml --version v2 --model gemma-local

Endpoints come from the ``llm:`` section of the configuration. ``generate`` merges new candidates into
``<lexicon-root>/<version>/candidates/llm.tsv`` (``--lexicon-root``, default ``lexicons``); ``label`` labels the generated candidates of that folder
(``llm.tsv``, ``pattern.tsv``; other sources with ``--sources``) and merges the labels into ``labels.tsv``. Both print a summary of counts and the LLM usage.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args

    actions = parser.add_subparsers(dest="action", required=True)
    generate = actions.add_parser("generate", help="propose new markers of a move with one or more models")
    label = actions.add_parser("label", help="label candidates strong_true / weak_true / false")
    for sub in (generate, label):
        add_config_args(sub)
        sub.add_argument("--version", required=True, help="lexicon version to write candidates for (<lexicon-root>/<version>/candidates/)")
        sub.add_argument("--lexicon-root", default="lexicons",
                         help="folder holding your lexicon versions (default: lexicons, in the working directory)")
        sub.add_argument("--prompts-dir", default=None, help="folder of the prompt files (default: the shipped ones, "
                         "lexicons/prompts)")
    generate.add_argument("--move", action="append", required=True, help="move to generate for (repeatable)")
    generate.add_argument("--models", nargs="+", help="endpoint names from llm.models (default: all of them)")
    generate.add_argument("--seed-lexicon", help="lexicon whose markers of the move are the seeds (default: mining.lexicon)")
    generate.add_argument("--max-seeds", type=int, default=None, help="use at most this many seeds (in lexicon order)")
    generate.add_argument("-n", "--n", type=int, default=40, help="markers to ask for per model and round")
    generate.add_argument("--rounds", type=int, default=1, help="rounds per model; later rounds see earlier answers")
    generate.add_argument("--max-tokens", type=int, default=None, help="answer budget per request (default 40 + 16 n)")
    label.add_argument("--model", help="endpoint name that labels (default: the first of llm.models)")
    label.add_argument("--sources", nargs="+",
                       help="candidate files to label, by source name (default: llm and pattern; curated sources such as "
                       "spans or extension only when named: the build then filters them by the labels too)")
    label.add_argument("--batch", action="store_true", help="use the Batch API (resumable; half price on OpenAI)")
    label.add_argument("--max-tokens", type=int, default=160)


def run(args: argparse.Namespace) -> int:
    from ratio_spark.config import load_config
    from ratio_spark.core.config import ConfigError
    from ratio_spark.llm import LLMClient

    config = load_config(args.conf, args.overrides)
    if not config.llm.models:
        raise ConfigError("no LLM endpoints configured: add them under llm.models (see conf/llm-local.yaml)")
    with LLMClient(config.llm) as client:
        summary = _generate(args, config, client) if args.action == "generate" else _label(args, config, client)
        summary["usage"] = client.usage()
        print("\nLLM usage (this run):\n" + client.usage_report())
    from ratio_spark.cli.common import write_summary

    write_summary(args.summary_json, summary)
    return 1 if summary.get("failed") else 0


def _prompt_kwargs(args) -> dict:
    from ratio_spark.lexicon.curation.llm import PROMPTS_DIR

    return {"prompts_dir": Path(args.prompts_dir) if args.prompts_dir else PROMPTS_DIR}


def _generate(args, config, client) -> dict:
    from ratio_spark.lexicon.loader import load_lexicon
    from ratio_spark.lexicon.curation.formats import CANDIDATE_COLUMNS
    from ratio_spark.lexicon.curation.llm import (
        GENERATE_PROMPT, candidates_dir, generate_candidates, load_moves, load_prompt, merge_candidates, read_rows,
        write_rows,
    )

    prompts_dir = _prompt_kwargs(args)["prompts_dir"]
    prompt, moves = load_prompt(GENERATE_PROMPT, prompts_dir), load_moves(prompts_dir)
    models = args.models or [m.name for m in config.llm.models]
    for name in models:
        client.endpoint(name)
    seed_lexicon = load_lexicon(args.seed_lexicon or config.mining.lexicon)
    everything = [m.text for m in seed_lexicon.markers]  # moves and distractors: never propose them again
    out = candidates_dir(args.version, args.lexicon_root) / "llm.tsv"
    new_rows, per_move = [], {}
    for move in args.move:
        seeds = [m.text for m in seed_lexicon.moves(move)][: args.max_seeds]
        stats: Counter = Counter()
        rows = generate_candidates(client, models, move, seeds, args.n, rounds=args.rounds, exclude=everything,
                                   extendable_prefixes=[m.text for m in seed_lexicon.markers if m.extendable],
                                   prompt=prompt, moves=moves, stats=stats, max_tokens=args.max_tokens)
        new_rows.extend(rows)
        per_move[move] = {"seeds": len(seeds), **dict(sorted(stats.items()))}
    existing = read_rows(out, ("marker", "move", "source", "provenance"))
    merged = merge_candidates(existing, new_rows)
    write_rows(out, merged, CANDIDATE_COLUMNS)
    print(f"\n== lexicon-llm generate ({prompt.file}, models {', '.join(models)}, seeds from {seed_lexicon.version}) ==")
    for move, stats in per_move.items():
        print(f"  {move}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    added = len(merged) - len(existing)
    print(f"  {out}: {len(merged)} candidates ({added} new, {len(existing)} there before)")
    failed = sum(v for s in per_move.values() for k, v in s.items() if k.startswith("failed_requests"))
    if failed:
        print(f"  {failed} request(s) failed; run again to retry them (answers so far are cached)")
    return {"stage": "lexicon-llm generate", "file": str(out), "moves": per_move, "candidates": len(merged),
            "new": added, "failed": failed}


def _label(args, config, client) -> dict:
    from ratio_spark.lexicon.curation.formats import LABEL_COLUMNS, LABELS_FILE
    from ratio_spark.lexicon.curation.llm import (
        LABEL_PROMPT, candidates_dir, label_candidates, labeller_name, load_moves, load_prompt, merge_labels,
        read_all_candidates, read_rows, write_rows,
    )

    prompts_dir = _prompt_kwargs(args)["prompts_dir"]
    prompt, moves = load_prompt(LABEL_PROMPT, prompts_dir), load_moves(prompts_dir)
    model = args.model or config.llm.models[0].name
    folder = candidates_dir(args.version, args.lexicon_root)
    candidates = read_all_candidates(folder, args.sources)
    if not candidates:
        print(f"no candidates in {folder}: nothing to label")
        return {"stage": "lexicon-llm label", "candidates": 0, "failed": 0}
    stats: Counter = Counter()
    batch_dir = None
    if args.batch:
        batch_dir = Path(config.llm.cache_dir).expanduser() / "batches" / f"label-{args.version}-{model}-{prompt.id}"
    rows = label_candidates(client, model, candidates, prompt=prompt, moves=moves, stats=stats,
                            batch_state_dir=batch_dir, max_tokens=args.max_tokens)
    out = folder / LABELS_FILE
    existing = read_rows(out, LABEL_COLUMNS)
    write_rows(out, merge_labels(existing, rows), LABEL_COLUMNS)
    by_move = Counter((r["move"], r["label"]) for r in rows)
    failed = sum(v for k, v in stats.items() if k.startswith("failed:"))
    print(f"\n== lexicon-llm label ({labeller_name(model, prompt)}) ==")
    print(f"  candidates {stats['candidates']} (distinct marker+move), labelled {len(rows)}, failed {failed}")
    for (move, label), n in sorted(by_move.items()):
        print(f"  {move:<10} {label:<12} {n}")
    for key, n in sorted(stats.items()):
        if key.startswith("failed:"):
            print(f"  {key}: {n} (asked again by the next run)")
    print(f"  {out}: {len(merge_labels(existing, rows))} labels; only strong_true enter the lexicon")
    return {"stage": "lexicon-llm label", "file": str(out), "labeller": labeller_name(model, prompt),
            "candidates": stats["candidates"], "labelled": len(rows), "failed": failed,
            "labels": {f"{m}:{l}": n for (m, l), n in sorted(by_move.items())}}
