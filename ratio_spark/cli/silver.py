"""silver: the silver test set — sample pairs, judge them with two LLM prompts, calibrate against people.

Subcommands: ``sample`` (show or save the stratified sample), ``build`` (alias ``judge``: judge the
sample and write the ``silver`` table), ``sheet`` (a labelling sheet for annotators), ``agreement``
(the agreement table from a labels CSV, and the prompt selection it implies), ``anaphora`` (anaphoric
markers vs acceptance). See docs/silver.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from ratio_spark.cli.common import comma_list


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args, add_local_server_args

    sub = parser.add_subparsers(dest="silver_command", required=True)

    def llm_args(p: argparse.ArgumentParser) -> None:
        add_local_server_args(p, "judge")
        p.add_argument("--model", help="endpoint name from the llm: section (overrides silver.model)")

    p = sub.add_parser("sample", help="draw the stratified sample of a split and print its allocation")
    add_config_args(p)
    p.add_argument("--split", help="split to sample (default: silver.split)")
    p.add_argument("--out", help="also write the sampled pairs (.csv or .parquet)")
    p.add_argument("--strata", action="store_true", help="print every stratum, not only the per-move totals")

    for name in ("build", "judge"):
        p = sub.add_parser(name, help="judge the sample with the selected prompts and write the silver table")
        add_config_args(p)
        llm_args(p)
        p.add_argument("--split", help="split to build (default: silver.split)")
        p.add_argument("--cost-json", help="write the cost report to this JSON file")

    p = sub.add_parser("sheet", help="export a labelling sheet (CSV + HTML) for annotators")
    add_config_args(p)
    p.add_argument("--split", help="split to draw from (default: silver.split)")
    p.add_argument("--per-move", default="100", help="pairs per move, or 'all' (default 100)")
    p.add_argument("--moves", default="address,broaden,specify", help="comma-separated moves")
    p.add_argument("--seed", type=int, help="sampling seed (default: silver.seed + 1, apart from the silver sample)")
    p.add_argument("--exclude-labels", action="append", default=[], help="labels CSV whose pairs to leave out")
    p.add_argument("--annotator", default="", help="pre-fill the annotator column")
    p.add_argument("--out", required=True, help="folder for <name>.csv and <name>.html")
    p.add_argument("--name", default="sheet")

    p = sub.add_parser("agreement", help="agreement of every prompt with human labels; selects two prompts per move")
    add_config_args(p)
    llm_args(p)
    p.add_argument("--labels", required=True, action="append", help="labels CSV (repeatable)")
    p.add_argument("--calibration-annotator", help="default: silver.calibration_annotator, else the busiest annotator")
    p.add_argument("--moves", help="comma-separated moves to score (default: every move in the labels)")
    p.add_argument("--keep", type=int, default=2, help="prompts to select per move (default 2)")
    p.add_argument("--use-configured", action="store_true",
                   help="score the configured silver.prompts as the AND rule instead of selecting")
    p.add_argument("--out", help="write the table as CSV")
    p.add_argument("--write-selection", help="write the selection as a YAML conf fragment (silver: prompts: ...)")

    p = sub.add_parser("anaphora", help="anaphoric markers vs acceptance in the silver table (appendix E)")
    add_config_args(p)
    p.add_argument("--split", help="default: silver.split")
    p.add_argument("--out", help="write the table as CSV")


def _load(args):
    from ratio_spark.config import load_config

    return load_config(args.conf, args.overrides)


def _client(config, args):
    """An LLMClient for the llm: section (plus the bundled local server with --local-server): (client, endpoint)."""
    from ratio_spark.cli.common import llm_client

    return llm_client(config.llm, args.model or config.silver.model, args.local_server, args.local_port)


def _print_frame(title: str, frame) -> None:
    import pandas as pd

    print(f"\n== {title} ==")
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_rows", 500):
        print(frame.to_string(index=False))


def _cmd_sample(config, args) -> int:
    from ratio_spark.silver.pairs import load_pairs
    from ratio_spark.silver.sampling import sample_pairs

    split = args.split or config.silver.split
    s = config.silver
    sample = sample_pairs(load_pairs(config.tables.location, split), s.sample, seed=s.seed, stratify_by=s.stratify_by)
    _print_frame(f"sample of {split} (seed {s.seed}, equal allocation by {s.stratify_by})",
                 sample.allocation.groupby("move")[["available", "sampled"]].sum().assign(
                     strata=sample.allocation.groupby("move").size()).reset_index())
    if args.strata:
        _print_frame("per stratum", sample.allocation)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        (sample.pairs.to_parquet if out.suffix == ".parquet" else lambda p: sample.pairs.to_csv(p, index=False))(out)
        print(f"\nwrote {len(sample.pairs)} sampled pairs to {out}")
    return 0


def _cmd_build(config, args) -> int:
    from ratio_spark.cli.common import with_flags, write_summary
    from ratio_spark.silver.build import build_silver

    config = with_flags(config, {"silver.model": args.model})
    with _client(config, args) as (client, _):
        result = build_silver(config.silver, config.tables.location, client, split=args.split)
    counts = result.counts()
    _print_frame(f"silver {args.split or config.silver.split} (judge {result.run.model} = {result.run.model_id}, "
                 f"{result.run.transport})", counts)
    cost = result.run.cost_report()
    _print_frame("cost (tokens paid in this run; cached answers are free)", cost)
    print("\nLLM client usage:\n" + result.run.usage_report)
    print(f"\nsilver table: {result.location}  (accepted = true selects the silver queries)")
    write_summary(args.cost_json, {
        "counts": counts.to_dict("records"), "cost": cost.to_dict("records"), "client_usage": result.run.usage,
        "cost_usd": result.run.cost_usd, "transport": result.run.transport, "judge_model_id": result.run.model_id,
    })
    failed = int(counts["failed"].sum())
    if failed:
        errors = result.run.verdicts["error"].value_counts().to_dict()
        print(f"\n{failed} pairs have a failed request ({errors}); they are written with status=failed. "
              "Run the same command again: answered requests come from the cache, only these are retried.",
              file=sys.stderr)
        return 1
    return 0


def _cmd_sheet(config, args) -> int:
    from ratio_spark.silver.agreement import load_labels
    from ratio_spark.silver.pairs import load_pairs
    from ratio_spark.silver.prompts import load_prompts
    from ratio_spark.silver.sampling import sample_pairs
    from ratio_spark.silver.sheet import sheet_rows, write_sheet

    split = args.split or config.silver.split
    moves = comma_list(args.moves)
    size = "all" if args.per_move == "all" else int(args.per_move)
    excluded = set()
    for path in args.exclude_labels:
        excluded |= set(load_labels(path)["query_id"])
    pairs = load_pairs(config.tables.location, split)
    pairs = pairs[~pairs["query_id"].isin(excluded)]
    seed = args.seed if args.seed is not None else config.silver.seed + 1
    sample = sample_pairs(pairs, {m: size for m in moves}, seed=seed, stratify_by=config.silver.stratify_by)
    rows = sheet_rows(sample.pairs, seed=seed, annotator=args.annotator)
    prompts = load_prompts(config.silver.prompt_dir)
    guides = {m: prompts[m][config.silver.prompts[m][0]] for m in moves if m in config.silver.prompts and m in prompts}
    paths = write_sheet(rows, args.out, guides, name=args.name)
    print(f"{len(rows)} pairs ({rows['move'].value_counts().to_dict()}; {len(excluded)} already labelled left out)")
    for p in paths:
        print(f"wrote {p}")
    return 0


def _cmd_agreement(config, args) -> int:
    import pandas as pd

    from ratio_spark.silver.agreement import LabelsError, agreement_table, calibration_annotator, format_table, load_labels
    from ratio_spark.silver.judge import judge_pairs
    from ratio_spark.silver.pairs import load_pairs
    from ratio_spark.silver.prompts import load_prompts

    labels = pd.concat([load_labels(p) for p in args.labels], ignore_index=True)
    labels = labels.drop_duplicates(["query_id", "annotator"])
    pairs = load_pairs(config.tables.location, None)
    pairs = pairs[pairs["query_id"].isin(set(labels["query_id"]))]
    missing = set(labels["query_id"]) - set(pairs["query_id"])
    if missing:
        raise LabelsError(f"{len(missing)} labelled pairs are not in the queries table (e.g. {sorted(missing)[0]}): "
                          "were the labels made on these tables?")
    if args.moves:
        wanted = set(comma_list(args.moves))
        pairs = pairs[pairs["move"].isin(wanted)]
        labels = labels[labels["query_id"].isin(set(pairs["query_id"]))]
        if pairs.empty:
            raise LabelsError(f"no labelled pairs of move(s) {sorted(wanted)}: choose --moves among the labelled ones")
    all_prompts = load_prompts(config.silver.prompt_dir)
    variants = {m: list(all_prompts[m].values()) for m in sorted(pairs["move"].unique())}
    with _client(config, args) as (client, model):
        run = judge_pairs(client, pairs, variants, model=model, mode="sync", max_tokens=config.silver.max_tokens)
    failed = run.verdicts["error"].notna().sum()
    calibrator = calibration_annotator(labels, args.calibration_annotator or config.silver.calibration_annotator)
    selected = {m: config.silver.prompts[m] for m in variants} if args.use_configured else None
    table, chosen = agreement_table(labels, run.verdicts, pairs.set_index("query_id")["move"],
                                    calibrator=calibrator, selected=selected, k=args.keep)
    print(f"judge: {run.model} ({run.model_id}); {len(pairs)} labelled pairs, {len(labels)} labels, "
          f"{labels['annotator'].nunique()} annotator(s); calibration annotator: {calibrator}; "
          f"{int(failed)} verdicts missing (failed requests)")
    print(format_table(table))
    print("\nselected prompts (the AND rule):")
    for move, ids in chosen.items():
        print(f"  {move}: {ids}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    if args.write_selection:
        import yaml

        Path(args.write_selection).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write_selection).write_text(
            f"# Prompt selection by F1 against {calibrator} on {len(pairs)} labelled pairs, judge {run.model_id}.\n"
            + yaml.safe_dump({"silver": {"prompts": chosen}}, sort_keys=True))
        print(f"wrote {args.write_selection} (use it with --conf, or copy it into your conf)")
    return 0


def _cmd_anaphora(config, args) -> int:
    from ratio_spark.silver.anaphora import anaphora_table, format_anaphora
    from ratio_spark.silver.pairs import PairsError
    from ratio_spark.silver.table import read_silver

    split = args.split or config.silver.split
    judged = read_silver(config.tables.location("silver"), split)
    if judged.empty:
        raise PairsError(f"the silver table has no rows for split {split!r}: build it first (ratio-spark silver build)")
    table = anaphora_table(judged)
    print(format_anaphora(table))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0


COMMANDS = {"sample": _cmd_sample, "build": _cmd_build, "judge": _cmd_build, "sheet": _cmd_sheet,
            "agreement": _cmd_agreement, "anaphora": _cmd_anaphora}


def run(args: argparse.Namespace) -> int:
    return COMMANDS[args.silver_command](_load(args), args)
