"""The Inspire search service under load, and an audit of its date gate (issue 30).

    flock /tmp/ratio-bench.lock .venv/bin/python benchmarks/inspire_load.py --sample /tmp/inspire-load --episodes 16 \
        --out benchmarks/results/inspire_load.json
    .venv/bin/python benchmarks/inspire_load.py --instances /work/data/inspire/acl/instances/v1 --episodes 16

The service is ``ratio-spark inspire serve --port 0`` in a subprocess (BM25 backend; ``--set`` overrides go
to it). ``--sample DIR`` first builds the instances of the bundled sample (the 299 TEI papers, written as Delta
tables by the tests' own writer, tests/inspire/test_inspire.py, then ``build_instances``) into DIR.

* **Load**: ``--episodes`` agent episodes at once (a thread and a connection each), each over one instance
  (cycled): start, ``--searches`` searches (words of the brief, in a different order each time), a
  submission of what came back, over ``POST /episodes/{id}/call`` as the agent harness sends them. Figures:
  requests/s, p50/p99 latency, errors (any answer that is not a 200 with ``ok: true``).
* **Date gate**: for every instance, ``--gate-queries`` generated queries (titles and ids of papers published
  on or after its cutoff, the target's own title and id, dates and years after the cutoff, crafted ids: case,
  spaces, zero-width characters, path-like), each searched at the maximum limit; then a submission of the
  target, later papers and the crafted ids. Every result and every accepted id is checked against the corpus:
  published strictly before the instance's cutoff, never the target. Any violation is listed.
The CI test (tests/inspire/test_inspire_service.py) runs the same code on the sample at small size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

import httpx

from ratio_spark.core.web import ServiceProcess

REPO = Path(__file__).resolve().parents[1]


class Service(ServiceProcess):
    """``ratio-spark inspire serve --port 0``; ready once ``/health`` answers."""

    def __init__(self, instances: Path, trajectories: Path, overrides: list[str] = ()):
        args = ["inspire", "serve", "--instances", str(instances), "--port", "0", "--trajectories", str(trajectories)]
        super().__init__(args + [a for override in overrides for a in ("--set", override)], banner="Inspire service:")
        deadline = time.monotonic() + 60
        while True:  # the banner comes just before uvicorn serves the bound socket
            try:
                httpx.get(self.url + "/health", timeout=5).raise_for_status()
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    self.stop()  # never leave a server behind
                    raise
                time.sleep(0.1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def load_episodes(url: str, instance_ids: list[str], episodes: int, searches: int, run_id: str = "load") -> dict:
    """``episodes`` episodes at once (see the module's docstring); latencies and errors."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def post(client: httpx.Client, path: str, body: dict) -> dict:
        started = time.perf_counter()
        try:
            response = client.post(path, json=body)
            answer = response.json()
            problem = None if response.status_code == 200 and answer.get("ok", True) else \
                f"{path}: {response.status_code} {response.text[:200]}"
        except (httpx.HTTPError, ValueError) as exc:
            answer, problem = {}, f"{path}: {exc!r}"
        with lock:
            latencies.append(time.perf_counter() - started)
            if problem:
                errors.append(problem)
        return answer

    def episode(number: int) -> None:
        rng = random.Random(number)
        iid = instance_ids[number % len(instance_ids)]
        with httpx.Client(base_url=url, timeout=120) as client:
            start = post(client, "/episodes", {"instance_id": iid, "run_id": f"{run_id}-{number}"})
            if "episode_id" not in start:
                return
            eid = start["episode_id"]
            words = start["brief"].split() or ["paper"]
            exposed: list[str] = []
            for _ in range(min(searches, start["search_budget"])):
                query = " ".join(rng.sample(words, min(len(words), 8)))
                found = post(client, f"/episodes/{eid}/call", {"name": "search_papers",
                                                              "arguments": json.dumps({"query": query, "limit": 10})})
                exposed += [r["paper_id"] for r in found.get("results", [])]
            post(client, f"/episodes/{eid}/call", {"name": "submit_answer",
                                                  "arguments": {"paper_ids": list(dict.fromkeys(exposed))[:10]}})

    threads = [threading.Thread(target=episode, args=(n,)) for n in range(episodes)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return {"episodes": episodes, "searches_per_episode": searches, "requests": len(latencies),
            "seconds": round(elapsed, 2), "requests_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": round(1000 * percentile(latencies, 0.5), 1), "p99_ms": round(1000 * percentile(latencies, 0.99), 1),
            "error_count": len(errors), "errors": errors[:20]}


def crafted(paper_id: str) -> list[str]:
    """Ways to write an id that must not reach a paper the episode may not see."""
    return [paper_id, paper_id.lower(), paper_id.upper(), f" {paper_id} ", f"{paper_id}\u200b", f"\u200b{paper_id}",
            f"{paper_id}/", f"../{paper_id}", paper_id.replace("-", "_"), f"{paper_id}%00", f"{paper_id}.tei.xml"]


def gate_queries(instance, corpus, rng: random.Random, count: int) -> list[str]:
    """Queries made to find what the gate hides (see the module's docstring)."""
    import numpy as np

    cutoff = np.datetime64(instance.cutoff, "D")
    later = [i for i, d in enumerate(corpus.dates) if d >= cutoff]
    target = corpus.ids.index(instance.target_id)
    pool = [corpus.titles[target], instance.target_id, corpus.abstracts[target][:300], instance.brief,
            f"{instance.cutoff.isoformat()}", f"published after {instance.cutoff.year}", str(instance.cutoff.year + 1)]
    for i in rng.sample(later, min(len(later), count)):
        day = str(corpus.dates[i])
        pool += [corpus.titles[i], corpus.ids[i], f"{corpus.titles[i]} {day}", f"{day} {corpus.ids[i]}",
                 f"year:{day[:4]} title:{corpus.titles[i]}", rng.choice(crafted(corpus.ids[i])),
                 f"{corpus.abstracts[i][:200]} {day[:4]}"]
    return [q for q in pool if q.strip()][:count]


def gate_audit(url: str, folder: Path, queries_per_instance: int, max_limit: int, seed: int = 0) -> dict:
    """Every instance searched with ``gate_queries`` and sent crafted submissions; violations listed."""
    import numpy as np

    from ratio_spark.inspire.instances import InstanceSet
    from ratio_spark.inspire.search import SearchCorpus

    instances = InstanceSet.load(folder)
    corpus = SearchCorpus.load(instances.corpus_path)
    dates = dict(zip(corpus.ids, corpus.dates))
    rng = random.Random(seed)
    violations, searched, results, submitted = [], 0, 0, 0
    with httpx.Client(base_url=url, timeout=120) as client:
        for instance in instances.instances.values():
            cutoff = np.datetime64(instance.cutoff, "D")
            eid = client.post("/episodes", json={"instance_id": instance.instance_id, "run_id": "gate"}).json()["episode_id"]

            def check(paper_id: str, where: str) -> None:
                if paper_id == instance.target_id or not dates[paper_id] < cutoff:
                    violations.append(f"{instance.instance_id} (cutoff {instance.cutoff}): {paper_id} "
                                      f"({dates[paper_id]}) in {where}")

            exposed = []
            for query in gate_queries(instance, corpus, rng, queries_per_instance):
                answer = client.post(f"/episodes/{eid}/search_papers", json={"query": query, "limit": max_limit})
                searched += 1
                if answer.status_code != 200 or not answer.json().get("ok"):
                    violations.append(f"{instance.instance_id}: search {query[:60]!r} answered {answer.status_code} "
                                      f"{answer.text[:200]}")
                    continue
                for result in answer.json()["results"]:
                    results += 1
                    check(result["paper_id"], f"the results of {query[:60]!r}")
                    exposed.append(result["paper_id"])
            later = [pid for pid in corpus.ids if dates[pid] >= cutoff][:20]
            # the target and later papers as written and as crafted, and one exposed id (a positive control)
            tries = [*crafted(instance.target_id)[:4], *later[:3], *crafted(later[0])[1:3], *exposed[:1]]
            done = client.post(f"/episodes/{eid}/submit_answer", json={"paper_ids": tries}).json()
            for pid in done.get("submitted", []):
                submitted += 1
                check(pid, "an accepted submission")
    return {"instances": len(instances.instances), "queries": searched, "results_checked": results,
            "accepted_ids_checked": submitted, "violations": violations[:50], "violation_count": len(violations)}


def build_sample(root: Path) -> Path:
    """The sample's instances (as tests/inspire/test_inspire.py builds them) under ``root``; returns the version
    folder."""
    from ratio_spark.config import load_config
    from ratio_spark.inspire.build import build_instances

    folder = root / "instances" / "v1"
    if (folder / "manifest.json").exists():
        return folder
    sys.path[:0] = [str(REPO / "tests" / "inspire"), str(REPO / "tests")]  # test_inspire.py, and the conftest it imports
    from test_inspire import write_sample_tables

    write_sample_tables(root / "tables")
    config = load_config(None, [f"tables.root={root / 'tables'}", f"inspire.root={root / 'instances'}",
                                "inspire.targets.start=2017-06-01", "inspire.targets.end=2018-12-31",
                                f"llm.cache_dir={root / 'llm'}"])
    build_instances(config.inspire, config.tables.location, log=lambda *_: None)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--instances", help="an instance version folder (from `ratio-spark inspire build`)")
    where.add_argument("--sample", help="build the bundled sample's instances into this folder and use them")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--gate-queries", type=int, default=200, help="generated queries per instance")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    folder = Path(args.instances) if args.instances else build_sample(Path(args.sample))
    trajectories = Path(args.sample or "/tmp/inspire-load") / f"trajectories-{os.getpid()}"
    service = Service(folder, trajectories, [f"inspire.search.budget={max(args.searches, args.gate_queries)}"])
    try:
        from ratio_spark.inspire.instances import InstanceSet

        ids = list(InstanceSet.load(folder).instances)
        figures = {"uptime": os.getloadavg(), "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                   "args": vars(args), "load": load_episodes(service.url, ids, args.episodes, args.searches)}
        print(json.dumps(figures["load"], indent=2), flush=True)
        max_limit = httpx.get(service.url + "/tools").json()[0]["function"]["parameters"]["properties"]["limit"]["maximum"]
        figures["gate"] = gate_audit(service.url, folder, args.gate_queries, max_limit)
        print(json.dumps(figures["gate"], indent=2), flush=True)
    finally:
        service.stop()
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    return 0 if figures["load"]["error_count"] == 0 and figures["gate"]["violation_count"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
