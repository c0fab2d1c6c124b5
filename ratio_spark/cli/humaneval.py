"""humaneval: blind A/B human evaluation of two retrievers — assign, serve the web app, report, export qrels

    ratio-spark humaneval assign --conf conf/sample.yaml --system bm25=results/sample/runs/BM25-unigram \\
        --system minilm=results/sample/runs/<label> --annotators alice,bob --per-move 5 --out studies/sample.sqlite
    ratio-spark humaneval serve  --study studies/sample.sqlite          # http://127.0.0.1:8765/t/<token>
    ratio-spark humaneval report --study studies/sample.sqlite --out studies/sample-report
    ratio-spark humaneval export --study studies/sample.sqlite --out studies/sample-qrels

Settings come from the ``humaneval:`` section of the configuration (``ratio_spark.humaneval.settings``); the
flags override it. Plain Python (no JVM). See docs/human-eval.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from ratio_spark.cli.common import comma_list, port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args

    sub = parser.add_subparsers(dest="humaneval_command", required=True)

    p = sub.add_parser("assign", help="sample queries, record the A/B order, assign annotators: write a study file")
    add_config_args(p)
    p.add_argument("--system", action="append", default=[], metavar="NAME=RUN", required=True,
                   help="a system and its run: a TREC file or a folder of them (runs/<system>/ from "
                        "`ratio-spark evaluate`); give exactly two, the first is the baseline")
    p.add_argument("--annotators", required=True,
                   help="names (alice,bob) or a CSV with columns annotator[,subfields] (subfields ';'-separated)")
    p.add_argument("--out", required=True, help="the study file to create (SQLite; never overwritten)")
    p.add_argument("--split", help="default: humaneval.split (test)")
    p.add_argument("--moves", help="comma-separated (default: humaneval.moves)")
    p.add_argument("--queries", choices=["all", "silver"], help="silver: only queries the LLM judge accepted")
    p.add_argument("--per-move", type=int, help="queries per move (default: humaneval.per_move, 40)")
    p.add_argument("--seed", type=int, help="sampling, A/B order and assignment seed (default: humaneval.seed)")
    p.add_argument("--depth", type=int, help="candidates per list (default: humaneval.depth, 10)")
    p.add_argument("--assignment", choices=["round_robin", "subfield"], help="default: humaneval.assignment")
    p.add_argument("--subfields", help="CSV mapping query_id or paper_id to a subfield (for --assignment subfield)")
    p.add_argument("--overlap", type=float, help="share of each move's queries that a second annotator labels too")

    p = sub.add_parser("serve", help="serve the annotation app (FastAPI + uvicorn) for a study")
    p.add_argument("--study", required=True, help="the study file")
    add_config_args(p)
    p.add_argument("--host", help="default: humaneval.host (127.0.0.1; anything else exposes the app to the network)")
    p.add_argument("--port", type=port, help="default: humaneval.port (8765); 0 takes a free port")

    p = sub.add_parser("report", help="the paper's Tables 2, 11, 12, agreement and a plot from a study")
    p.add_argument("--study", required=True)
    add_config_args(p)
    p.add_argument("--out", required=True, help="folder for report.md, the CSV tables, humaneval.png, manifest.json")
    p.add_argument("--permutations", type=int, help="default: humaneval.permutations (10,000)")
    p.add_argument("--permutation-seed", type=int, help="default: humaneval.permutation_seed (0)")

    p = sub.add_parser("export", help="the candidate labels as TREC qrels, plus every raw label as CSV")
    p.add_argument("--study", required=True)
    p.add_argument("--out", required=True, help="folder for qrels.trec and labels.csv")
    p.add_argument("--aggregate", choices=["majority", "any", "all"], default="majority",
                   help="how labels of several annotators become one relevance (default: majority)")


def _settings(args):
    from ratio_spark.config import load_config

    return load_config(args.conf, args.overrides)


def _cmd_assign(args) -> int:
    from ratio_spark.cli.common import with_flags
    from ratio_spark.evaluation.data import silver_verdicts
    from ratio_spark.humaneval.assign import (AssignError, build_study, load_inputs, read_annotators, read_run,
                                              read_subfields, write_links)
    from ratio_spark.humaneval.study import Study

    config = with_flags(_settings(args), {f"humaneval.{k}": v for k, v in {
        "split": args.split, "queries": args.queries, "per_move": args.per_move, "seed": args.seed,
        "depth": args.depth, "assignment": args.assignment, "overlap": args.overlap,
        "moves": comma_list(args.moves) if args.moves else None,
    }.items()})
    h = config.humaneval
    if len(args.system) != 2:
        raise AssignError(f"give exactly two --system NAME=RUN (got {len(args.system)})")
    runs = []
    for spec in args.system:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise AssignError(f"--system {spec!r}: write NAME=RUN, e.g. bm25=results/sample/runs/BM25-unigram")
        runs.append(read_run(name.strip(), path.strip()))
    if Path(args.out).exists():
        raise AssignError(f"{args.out} exists: a study is never overwritten (its labels would be lost)")
    pairs, pool = load_inputs(config.tables.location, h.split)
    accepted = None
    if h.queries == "silver":
        silver = silver_verdicts(config.tables.location("silver")).to_pylist()
        accepted = {r["query_id"] for r in silver if r["accepted"] is True}
    new = build_study(
        pairs, pool, runs, read_annotators(args.annotators), split=h.split, moves=h.moves, per_move=h.per_move,
        stratify_by=h.stratify_by, seed=h.seed, depth=h.depth, mode=h.assignment, overlap=h.overlap,
        subfields=read_subfields(args.subfields) if args.subfields else None, accepted=accepted,
        source=config.tables.root,
    )
    Study.create(args.out, new.content)
    links = write_links(Path(args.out).with_suffix(".links.tsv"), new.tokens)
    counts = new.counts
    print(f"== humaneval assign: {h.split} split, {runs[0].name} vs {runs[1].name} ==")
    for key in ("queries_in_split", "other_moves", "not_silver_accepted", "missing_from_a_run",
                "no_annotator_for_subfield", "eligible"):
        if key in counts:
            print(f"  {key:<30} {counts[key]}")
    print(f"  {'sampled_by_move':<30} " + ", ".join(f"{m} {n}" for m, n in counts["sampled_by_move"].items())
          + f"  (up to {h.per_move} per move, equal allocation by {h.stratify_by}, seed {h.seed})")
    print(f"  {'assignments':<30} {counts['assignments']}  ({counts['queries_labelled_twice']} queries labelled twice"
          + (f", {counts['second_annotator_missing']} without a second annotator" if counts["second_annotator_missing"] else "")
          + ")")
    per_person = {}
    for row in new.content.assignments:
        per_person[row["annotator"]] = per_person.get(row["annotator"], 0) + 1
    print(f"  {'per_annotator':<30} " + ", ".join(f"{k} {v}" for k, v in per_person.items()))
    print(f"\nstudy: {args.out}")
    print(f"personal links (secret; send each person their own): {links}")
    print(f"  start the app with: ratio-spark humaneval serve --study {args.out}")
    print("  then each link is the server's address + the path in that file, e.g. http://127.0.0.1:8765/t/<token>")
    return 0


def _cmd_serve(args) -> int:
    from ratio_spark.core.web import bind_notice
    from ratio_spark.humaneval.app import serve

    h = _settings(args).humaneval
    host = args.host or h.host
    port = h.port if args.port is None else args.port
    links = Path(args.study).with_suffix(".links.tsv")

    def ready(url: str) -> None:
        print(f"serving {args.study} at {url}/", flush=True)
        print(f"personal links: {url}/t/<token>, tokens in {links}" if links.exists()
              else "personal links: <address>/t/<token> (the tokens were printed by `humaneval assign`)", flush=True)
        print(f"  {bind_notice(host)}", flush=True)
        print("stop with Ctrl+C; every answer is saved when it is given", flush=True)

    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    serve(args.study, host=host, port=port, on_ready=ready)
    return 0


def _cmd_report(args) -> int:
    from ratio_spark.humaneval.analysis import analyse
    from ratio_spark.humaneval.report import write_report
    from ratio_spark.humaneval.study import Study

    h = _settings(args).humaneval
    study = Study(args.study)
    meta = study.meta()
    frames = study.frames()
    analysis = analyse(frames, depth=int(meta.get("depth", h.depth)),
                       permutations=args.permutations or h.permutations,
                       seed=h.permutation_seed if args.permutation_seed is None else args.permutation_seed)
    written = write_report(analysis, meta, args.study, args.out, systems_rows=frames["systems"].to_dict("records"))
    print((Path(args.out) / "report.md").read_text(encoding="utf-8"))
    print(f"wrote {len(written)} files to {args.out}")
    return 0


def _cmd_export(args) -> int:
    from ratio_spark.humaneval.qrels import write_qrels
    from ratio_spark.humaneval.study import Study

    from ratio_spark.cli.common import print_summary

    print_summary(write_qrels(Study(args.study).frames(), args.out, args.aggregate), "humaneval export")
    return 0


COMMANDS = {"assign": _cmd_assign, "serve": _cmd_serve, "report": _cmd_report, "export": _cmd_export}


def run(args: argparse.Namespace) -> int:
    return COMMANDS[args.humaneval_command](args)
