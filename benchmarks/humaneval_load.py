"""The human-evaluation app under load (issue 30): N annotators labelling at once through the page's HTTP
endpoints, many clients writing one candidate at once, a SIGKILL of the server mid-load, and an audit of the
SQLite file against every acknowledged answer.

    flock /tmp/ratio-bench.lock .venv/bin/python benchmarks/humaneval_load.py --annotators 64 --out benchmarks/results/humaneval_load.json

The server is ``ratio-spark humaneval serve --port 0`` in a subprocess (real uvicorn, real SQLite in WAL mode
with ``synchronous=FULL``). Without ``--study``, the script makes a study of its own with ``Study.create``:
``--queries-per-annotator`` queries per annotator, two lists of 10 made-up candidates each (the text plays no
part in the load). Each annotator is a thread with its own HTTP connection that, query by query, reads the
state, labels every candidate (changing its mind on some), gives a preference and a comment, and reads the
state again. Beside them, ``--conflict-clients`` clients write one annotator's one candidate at once, and every
annotator tries one write on someone else's query (403: nothing stored). The audit (``audit``) then checks the
file: every label, preference and comment acknowledged with a 2xx is stored once with a value that the
acknowledgements allow (the last one acknowledged by a client; for concurrent writers, one that no later-sent
write followed), nothing else is stored, and no answer said "database is locked". With ``--kill-after S`` the
server is SIGKILLed S seconds into the load and started again on the same file; the clients carry on.
The CI test (tests/humaneval/test_humaneval_service.py) runs the same code with 8 annotators.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ratio_spark.core.web import ServiceProcess


class Server(ServiceProcess):
    """``ratio-spark humaneval serve --port 0`` (or a given port: a restart keeps the address)."""

    def __init__(self, study: Path, port: int = 0):
        super().__init__(["humaneval", "serve", "--study", str(study), "--port", str(port)], banner="serving ")


def synthetic_study(path: Path, annotators: int, queries_per_annotator: int, depth: int = 10) -> dict[str, str]:
    """A study file of ``annotators`` annotators (and an admin), each with their own queries; returns the tokens."""
    from ratio_spark.humaneval.study import Study, StudyContent, token_digest

    rng = random.Random(0)
    names = [f"annotator{i:03d}" for i in range(annotators)]
    tokens = {name: f"tok-{name}-{rng.getrandbits(64):016x}" for name in [*names, "admin"]}
    queries, candidates, lists, assignments = [], [], [], []
    for number in range(annotators * queries_per_annotator):
        qid = f"q{number:05d}"
        queries.append({"query_id": qid, "move": ("address", "broaden", "specify")[number % 3], "marker": "To do so,",
                        "stratum": "s", "query_text": f"Query {number} about a problem.", "gold_candidate_id": f"{qid}-a0",
                        "paper_id": f"P{number}", "subfield": None, "system_a": "one", "system_b": "two"})
        for side, system in (("a", "one"), ("b", "two")):
            for rank in range(1, depth + 1):
                cid = f"{qid}-{side}{rank - 1}"
                candidates.append({"candidate_id": cid, "text": f"Candidate {cid}.", "paper_id": None})
                lists.append({"query_id": qid, "system": system, "rank": rank, "candidate_id": cid})
        annotator = names[number % annotators]
        assignments.append({"assignment_id": number + 1, "annotator": annotator, "query_id": qid,
                            "position": number // annotators})
    accounts = [{"name": n, "role": "admin" if n == "admin" else "annotator", "subfields": "",
                 "token_sha256": token_digest(t)} for n, t in tokens.items()]
    Study.create(path, StudyContent(
        meta={"depth": depth, "split": "test", "source": "benchmarks/humaneval_load.py"},
        systems=[{"system": "one", "position": 0, "run_path": "-", "run_sha256": "-"},
                 {"system": "two", "position": 1, "run_path": "-", "run_sha256": "-"}],
        queries=queries, candidates=candidates, lists=lists, accounts=accounts, assignments=assignments))
    return tokens


@dataclass
class Write:
    """One attempt to send an answer: when it was sent, acknowledged (a 2xx) or lost (no answer came back)."""

    kind: str  # label | preference | comment
    key: tuple
    value: object
    sent: float
    acked: float | None = None
    lost: float | None = None  # the connection broke: it may or may not have been committed before
    refused: bool = False  # a 4xx: never committed


@dataclass
class Load:
    base: object  # () -> the server's current URL (a restarted server keeps the port)
    expect_connection_errors: bool = False
    latencies: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # unexpected answers to the clients' requests
    writes: list[Write] = field(default_factory=list)
    refused_writes: list[tuple] = field(default_factory=list)  # (assignment, candidate) sent with the wrong token
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, started: float, status: int | str, problem: str | None = None) -> None:
        with self.lock:
            self.latencies.append(time.perf_counter() - started)
            self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1
            if problem:
                self.errors.append(problem)


def _request(load: Load, client: httpx.Client, method: str, path: str, body: dict | None = None,
             expect: int = 200, write: tuple | None = None, retries: int = 240) -> dict | None:
    """One request (``write``: the answer's kind, key and value, recorded per attempt); a broken or refused
    connection (the server being killed and restarted) is retried."""
    for _ in range(retries):
        attempt = None
        if write is not None:
            attempt = Write(*write, sent=time.monotonic())
            with load.lock:
                load.writes.append(attempt)
        started = time.perf_counter()
        try:
            response = client.request(method, load.base() + path, json=body)
        except httpx.TransportError as exc:
            if attempt is not None:
                attempt.lost = time.monotonic()
            load.record(started, "connection_error", None if load.expect_connection_errors else f"{method} {path}: {exc!r}")
            time.sleep(0.25)
            continue
        if response.status_code == 503:  # the study was busy past its timeout: not saved, sent again (as a person would)
            if attempt is not None:
                attempt.refused = True
            load.record(started, 503)
            time.sleep(0.25)
            continue
        problem = None
        if response.status_code != expect:
            problem = f"{method} {path}: {response.status_code} {response.text[:200]}"
        if "database is locked" in response.text:
            problem = f"{method} {path}: 'database is locked' reached the client"
        load.record(started, response.status_code, problem)
        if attempt is not None:
            if 200 <= response.status_code < 300:
                attempt.acked = time.monotonic()
            else:
                attempt.refused = True
        return response.json() if response.status_code == 200 else None
    load.record(time.perf_counter(), "gave_up", f"{method} {path}: no server for {retries} tries")
    return None


def annotate(load: Load, token: str, assignment_ids: list[int], other: tuple[int, str] | None, seed: int) -> None:
    """One annotator's session over the API the page uses."""
    rng = random.Random(seed)
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=180) as client:
        if other is not None:  # someone else's query: refused, nothing stored
            with load.lock:
                load.refused_writes.append(other)
            _request(load, client, "POST", f"/api/assignments/{other[0]}/labels",
                     {"candidate_id": other[1], "useful": True}, expect=403)
        for aid in assignment_ids:
            state = _request(load, client, "GET", f"/api/assignments/{aid}")
            if state is None:
                continue
            for cid in sorted(_CANDIDATES[aid]):
                for _ in range(2 if rng.random() < 0.2 else 1):  # a change of mind on some
                    value = rng.random() < 0.5
                    _request(load, client, "POST", f"/api/assignments/{aid}/labels", {"candidate_id": cid, "useful": value},
                             write=("label", (aid, cid), value))
            preference = rng.choice(["A", "B", "tie"])
            _request(load, client, "POST", f"/api/assignments/{aid}/preference", {"preference": preference},
                     write=("preference", (aid,), preference))
            comment = f"comment {seed} {aid}"
            _request(load, client, "POST", f"/api/assignments/{aid}/comment", {"comment": comment},
                     write=("comment", (aid,), comment))
            _request(load, client, "GET", f"/api/assignments/{aid}")


_CANDIDATES: dict[int, list[str]] = {}  # assignment -> its distinct candidates (read from the study file)


def conflict(load: Load, token: str, aid: int, cid: str, seed: int, writes: int) -> None:
    """One of many clients writing the same candidate of the same query at once."""
    rng = random.Random(seed)
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=180) as client:
        for _ in range(writes):
            value = rng.random() < 0.5
            _request(load, client, "POST", f"/api/assignments/{aid}/labels", {"candidate_id": cid, "useful": value},
                     write=("label", (aid, cid), value))


def allowed_values(writes: list[Write]) -> set:
    """The values one key may hold after these attempts. An acknowledged write committed before it was
    acknowledged, so it can be the last only if no other acknowledged write was sent after that; a lost write
    committed before it was lost (one still in flight: at any time), or never. No acknowledged write: the key
    may also be unset (None)."""
    acked = [w for w in writes if w.acked is not None]
    last = [w for w in acked if not any(o.sent > w.acked for o in acked)]
    lost = [w for w in writes if w.acked is None and not w.refused
            and not any(o.sent > (w.lost or float("inf")) for o in acked)]
    return {w.value for w in last + lost} | (set() if acked else {None})


def audit(study: Path, load: Load) -> dict:
    """The study file against the acknowledged answers (see the module's docstring); a list of problems."""
    with sqlite3.connect(study) as conn:
        labels = {(a, c): bool(u) for a, c, u in conn.execute("SELECT assignment_id, candidate_id, useful FROM labels")}
        rows = conn.execute("SELECT COUNT(*) FROM labels").fetchone()[0]
        prefs = {(a,): p for a, p in conn.execute("SELECT assignment_id, preference FROM assignments")}
        comments = {(a,): c for a, c in conn.execute("SELECT assignment_id, comment FROM assignments")}
    stored = {"label": labels, "preference": prefs, "comment": comments}
    problems = []
    by_key: dict[tuple, list[Write]] = {}
    for write in load.writes:
        by_key.setdefault((write.kind, write.key), []).append(write)
    acknowledged = {k for k, ws in by_key.items() if any(w.acked is not None for w in ws)}
    for (kind, key), writes in by_key.items():
        value = stored[kind].get(key)
        if value in ("", None) and kind != "label":
            value = None
        if (kind, key) in acknowledged and value is None:
            problems.append(f"{kind} {key} was acknowledged but is not stored")
        elif value not in allowed_values(writes):
            problems.append(f"{kind} {key} holds {value!r}; the acknowledgements allow {allowed_values(writes)}")
    attempted = {key for kind, key in by_key if kind == "label"}
    extra = set(labels) - attempted
    if extra:
        problems.append(f"{len(extra)} label(s) stored that no client sent, e.g. {sorted(extra)[:3]}")
    refused = {aid for aid, _ in load.refused_writes}  # an assignment no one may write: only 403s were sent to it
    if any(aid in refused for aid, _ in labels):
        problems.append(f"a label refused with 403 was stored (assignment {sorted(refused)})")
    if rows != len(labels):
        problems.append(f"{rows} label rows for {len(labels)} keys")
    for kind in ("preference", "comment"):
        sent = {key for k, key in by_key if k == kind}
        unsent = [key for key, value in stored[kind].items() if value not in (None, "") and key not in sent]
        if unsent:
            problems.append(f"{len(unsent)} {kind}(s) stored that no client sent")
    acked = sum(w.acked is not None for w in load.writes)
    return {"acknowledged_writes": acked, "label_rows": rows, "problems": problems}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def run_load(study: Path, tokens: dict[str, str], conflict_clients: int = 8, conflict_writes: int = 20,
             kill_after: float | None = None, seed: int = 0) -> dict:
    """Serve ``study``, run every annotator and the conflicting writers at once, audit; returns the figures."""
    with sqlite3.connect(study) as conn:
        mine: dict[str, list[int]] = {}
        for aid, annotator in conn.execute("SELECT assignment_id, annotator FROM assignments ORDER BY position"):
            mine.setdefault(annotator, []).append(aid)
        for aid, cid in conn.execute("SELECT DISTINCT a.assignment_id, l.candidate_id FROM assignments a "
                                     "JOIN lists l USING (query_id)"):
            _CANDIDATES.setdefault(aid, []).append(cid)
    annotators = sorted(mine)
    untouched = mine[annotators[-1]].pop()  # only others' tokens write to it: every write a 403
    refused_target = (untouched, sorted(_CANDIDATES[untouched])[0])
    server = Server(study)
    current = {"server": server}
    load = Load(base=lambda: current["server"].url, expect_connection_errors=kill_after is not None)
    threads = []
    for number, name in enumerate(annotators):
        other = refused_target if name != annotators[-1] else None
        threads.append(threading.Thread(target=annotate, args=(load, tokens[name], mine[name], other, seed + number)))
    target = mine[annotators[0]][-1]
    hot = sorted(_CANDIDATES[target])[0]
    for number in range(conflict_clients):
        threads.append(threading.Thread(target=conflict, args=(load, tokens[annotators[0]], target, hot,
                                                               seed + 1000 + number, conflict_writes)))
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    restarts = 0
    if kill_after is not None:  # once that many answers are acknowledged
        while sum(w.acked is not None for w in list(load.writes)) < kill_after and any(t.is_alive() for t in threads):
            time.sleep(0.01)
        server.stop(signal.SIGKILL)
        with load.lock:  # what the killed server acknowledged must be on disk, before any restart
            at_kill = audit(study, Load(base=None, writes=list(load.writes), refused_writes=list(load.refused_writes)))
        current["server"] = Server(study, port=server.port)  # the same address: the clients carry on
        restarts = 1
        killed = {"acknowledged_writes_before_kill": at_kill["acknowledged_writes"],
                  "label_rows_after_kill": at_kill["label_rows"], "problems_after_kill": at_kill["problems"]}
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    current["server"].stop()
    result = audit(study, load)
    lines = [*server.lines, *(current["server"].lines if restarts else [])]
    leaked = [name for name, token in tokens.items() if any(token in line for line in lines)]
    requests = len(load.latencies)
    figures = {
        "annotators": len(annotators), "conflict_clients": conflict_clients, "requests": requests,
        "seconds": round(elapsed, 2), "requests_per_s": round(requests / elapsed, 1),
        "p50_ms": round(1000 * percentile(load.latencies, 0.5), 1),
        "p99_ms": round(1000 * percentile(load.latencies, 0.99), 1),
        "statuses": load.statuses, "errors": load.errors[:20], "error_count": len(load.errors),
        "restarts": restarts, "tokens_in_server_output": leaked, "untouched_assignment": untouched, **result,
    }
    if restarts:
        figures.update(killed)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotators", type=int, default=64)
    parser.add_argument("--queries-per-annotator", type=int, default=3)
    parser.add_argument("--conflict-clients", type=int, default=16)
    parser.add_argument("--conflict-writes", type=int, default=25)
    parser.add_argument("--kill-after", type=int, help="a second run: SIGKILL the server once this many answers "
                        "are acknowledged, then restart it")
    parser.add_argument("--work", default="/tmp/humaneval-load", help="folder for the study files")
    parser.add_argument("--out", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    runs = {}
    for name, kill in (("load", None), ("kill", args.kill_after)):
        if name == "kill" and kill is None:
            continue
        study = work / f"{name}.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{study}{suffix}").unlink(missing_ok=True)
        tokens = synthetic_study(study, args.annotators, args.queries_per_annotator)
        runs[name] = run_load(study, tokens, args.conflict_clients, args.conflict_writes, kill_after=kill)
        print(json.dumps({name: runs[name]}, indent=2), flush=True)
    figures = {"uptime": os.getloadavg(), "args": vars(args), "runs": runs}
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    return 0 if all(not r["problems"] and not r["error_count"] and not r["tokens_in_server_output"]
                    and not r.get("problems_after_kill") for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
