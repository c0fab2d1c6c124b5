"""inspire: Inspire on our corpus — build instances, serve the date-gated search, run policies, score them.

Subcommands: ``build`` (instances + manifest from the Delta tables), ``serve`` (the FastAPI search
service on 127.0.0.1), ``run`` (the LLM agent or a one-shot baseline over every instance, against a
service it starts or one at ``--service``), ``score`` (funnel metrics, bootstrap intervals, tables and a
plot). See docs/inspire.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ratio_spark.cli.common import port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args, add_local_server_args

    sub = parser.add_subparsers(dest="inspire_command", required=True)

    def instances_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--instances", help="instance version folder (default: <inspire.root>/<inspire.version>)")

    def llm_args(p: argparse.ArgumentParser) -> None:
        add_local_server_args(p, "grade")

    p = sub.add_parser("build", help="targets, cutoffs, graded antecedents and briefs -> a versioned instance folder")
    add_config_args(p)
    llm_args(p)

    p = sub.add_parser("serve", help="serve search_papers / submit_answer over one instance version (FastAPI)")
    add_config_args(p)
    instances_arg(p)
    p.add_argument("--backend", default="bm25", help="a retriever spec as in evaluate --retrievers (bm25, dense:minilm)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; anything else exposes the service to the network)")
    p.add_argument("--port", type=port, default=8765, help="port (0: a free one)")
    p.add_argument("--trajectories", required=True, help="folder for the trajectory files (<run_id>/<episode>.jsonl)")

    p = sub.add_parser("run", help="run a policy on every instance: the LLM agent or a one-shot baseline")
    add_config_args(p)
    instances_arg(p)
    llm_args(p)
    p.add_argument("--policy", required=True, choices=["agent", "one-shot"],
                   help="agent: the LLM harness (inspire.agent.model); one-shot: search once with the brief, submit")
    p.add_argument("--backend", default="bm25", help="search backend of the service it starts: a retriever spec as in "
                   "evaluate --retrievers (bm25, dense:minilm)")
    p.add_argument("--run-id", required=True, help="name of the run (its trajectory folder)")
    p.add_argument("--out", required=True, help="runs folder: trajectories/<run-id>/ and <run-id>.run.json go here")
    p.add_argument("--service", help="URL of a running service instead of starting one (its trajectories stay there)")
    p.add_argument("--max-instances", type=int, help="only the first N instances of the manifest")

    p = sub.add_parser("score", help="score runs: Table 2 and Table 3 metrics, paired bootstrap, funnel plot")
    add_config_args(p)
    instances_arg(p)
    p.add_argument("--runs", required=True, help="runs folder (as given to `run --out`)")
    p.add_argument("--run", action="append", required=True, dest="run_ids",
                   help="run id to score (repeatable; the first is the baseline of the paired comparisons)")
    p.add_argument("--out", required=True, help="folder for results.md, summary.csv, episodes.csv, funnel.png")
    p.add_argument("--clean-only", action="store_true", help="only targets whose brief the lexical check did not flag")
    p.add_argument("--max-instances", type=int, help="only the first N instances of the manifest (as `run` took them)")


def _instances_folder(config, args) -> Path:
    return Path(args.instances) if getattr(args, "instances", None) else Path(config.inspire.root) / config.inspire.version


def _service(config, folder: Path, backend: str, trajectories: Path):
    from ratio_spark.inspire.instances import InstanceSet
    from ratio_spark.inspire.search import DateGatedSearch, SearchCorpus, make_backend
    from ratio_spark.inspire.service import InspireService

    instances = InstanceSet.load(folder)
    corpus = SearchCorpus.load(instances.corpus_path)
    settings = config.inspire.search
    print(f"indexing {len(corpus)} papers ({', '.join(settings.fields)}) with {backend} ...", flush=True)
    search = DateGatedSearch(corpus, make_backend(backend, corpus, settings.fields, settings.dense_prefix))
    return InspireService(instances, search, settings, config.inspire.scoring, trajectories)


def _cmd_build(config, args) -> int:
    import contextlib

    from ratio_spark.cli.common import llm_client, print_summary, write_summary
    from ratio_spark.core.config import ConfigError
    from ratio_spark.inspire.build import build_instances

    ic = config.inspire
    models = {m for m in (ic.grading.model if ic.grading.grader == "llm" else None,
                          ic.brief.model if ic.brief.mode == "llm" else None) if m}
    if len(models) > 1 and args.local_server:
        raise ConfigError("--local-server serves one endpoint, but inspire.grading.model and inspire.brief.model "
                          "differ: set both to one endpoint, or leave out --local-server")
    started = time.time()
    context = llm_client(config.llm, next(iter(models)), args.local_server, args.local_port) if models \
        else contextlib.nullcontext((None, None))
    with context as (client, _):
        manifest = build_instances(ic, config.tables.location, client)
        if client is not None:
            print("\nLLM client usage:\n" + client.usage_report())
    summary = {"stage": "inspire build", "instances": len(manifest["splits"]["eval"]),
               "folder": str(Path(ic.root) / ic.version), **manifest["counts"], "seconds": round(time.time() - started, 1)}
    print_summary(summary)
    write_summary(args.summary_json, summary)
    return 0


def _cmd_serve(config, args) -> int:
    from ratio_spark.core.web import bind_notice, serve
    from ratio_spark.inspire.service import create_app

    service = _service(config, _instances_folder(config, args), args.backend, Path(args.trajectories))

    def ready(url: str) -> None:  # the port actually bound (--port 0 takes a free one)
        print(f"Inspire service: {len(service.instances.instances)} instances, backend {args.backend}, "
              f"{url} (trajectories in {args.trajectories})", flush=True)
        print(f"  {bind_notice(args.host)}", flush=True)

    serve(create_app(service), args.host, args.port, ready)
    return 0


def _cmd_run(config, args) -> int:
    import contextlib

    from ratio_spark.cli.common import llm_client
    from ratio_spark.core.config import ConfigError
    from ratio_spark.inspire import agent
    from ratio_spark.inspire.instances import InstanceSet
    from ratio_spark.inspire.manifest import code_commit, now_utc, sha256_file, write_json
    from ratio_spark.inspire.service import ServiceThread, create_app

    folder = _instances_folder(config, args)
    out = Path(args.out)
    instance_ids = list(InstanceSet.load(folder).instances)[: args.max_instances]
    settings = config.inspire.agent
    if args.policy == "agent" and not settings.model:
        raise ConfigError("--policy agent needs inspire.agent.model (an endpoint name of the llm: section): "
                          "set it, e.g. --set inspire.agent.model=gemma-local")
    with contextlib.ExitStack() as stack:
        url = args.service
        if url is None:
            service = _service(config, folder, args.backend, out / "trajectories")
            url = stack.enter_context(ServiceThread(create_app(service)))
        client = agent.ServiceClient(url)
        stack.callback(client.close)
        llm = None
        if args.policy == "agent":
            llm, _ = stack.enter_context(llm_client(config.llm, settings.model, args.local_server, args.local_port))
        records = []
        for number, iid in enumerate(instance_ids, 1):
            if args.policy == "agent":
                record = agent.agent_episode(client, llm, settings.model, iid, args.run_id, settings)
            else:
                record = agent.one_shot(client, iid, args.run_id, config.inspire.scoring.k, f"one-shot:{args.backend}")
            records.append(record)
            print(f"  [{number}/{len(instance_ids)}] {iid}: {record.status} ({record.turns} model turns)", flush=True)
        usage = llm.usage_report() if llm is not None else None
    prompt = Path(agent.__file__).with_name("prompts") / agent.AGENT_PROMPT
    write_json(out / f"{args.run_id}.run.json", {
        "run_id": args.run_id, "policy": args.policy, "backend": args.backend, "service": args.service or "in-process",
        "created_at": now_utc(), "code_commit": code_commit(), "instances": str(folder),
        "instances_manifest_sha256": sha256_file(folder / "manifest.json"),
        "agent": settings.model_dump(mode="json") if args.policy == "agent" else None,
        "agent_prompt_sha256": sha256_file(prompt) if args.policy == "agent" else None,
        "model": next(({"endpoint": m.name, "model": m.model, "temperature": m.temperature}
                       for m in config.llm.models if m.name == settings.model), None) if args.policy == "agent" else None,
        "episodes": [r.__dict__ for r in records],
    })
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    print(f"\nrun {args.run_id}: {len(records)} episodes {statuses}; trajectories in "
          f"{out / 'trajectories' / args.run_id if args.service is None else 'the service folder'}")
    if usage:
        print("\nLLM client usage:\n" + usage)
    return 0


def _cmd_score(config, args) -> int:
    from ratio_spark.inspire.instances import InstanceSet
    from ratio_spark.inspire.reports import write_reports
    from ratio_spark.inspire.scoring import ScoringError

    instances = InstanceSet.load(_instances_folder(config, args))
    runs = {}
    for run_id in args.run_ids:
        folder = Path(args.runs) / "trajectories" / run_id
        if not folder.is_dir():
            raise ScoringError(f"no trajectories for run {run_id!r} at {folder}: check --runs and --run "
                               "(the folder and run id given to `ratio-spark inspire run`)")
        runs[run_id] = folder
    summaries = write_reports(instances, runs, config.inspire.scoring, args.out, args.clean_only, args.max_instances)
    print((Path(args.out) / "results.md").read_text())
    from ratio_spark.cli.common import write_summary

    write_summary(args.summary_json, summaries)
    return 0


COMMANDS = {"build": _cmd_build, "serve": _cmd_serve, "run": _cmd_run, "score": _cmd_score}


def run(args: argparse.Namespace) -> int:
    from ratio_spark.config import load_config

    return COMMANDS[args.inspire_command](load_config(args.conf, args.overrides), args)
