"""The annotation app as an outside client meets it (issues 33 and 30): ``ratio-spark humaneval serve`` in a
subprocess on 127.0.0.1, a study made by ``humaneval assign`` from the shared sample runs (``humaneval_runs``).

Issue 33's defects, each with the exact request of the issue (D1 an id beyond SQLite's integers, D2 no token
and a bad body, D2b 10 MB bodies, D3 lax booleans); hostile requests by hand and schema-driven fuzzing from the
app's OpenAPI document (schemathesis): every answer a 4xx with one line, never a 500, never a stored row, no
token in the server's output; and the load test of benchmarks/humaneval_load.py at small size (8 annotators,
conflicting writers, a SIGKILL mid-load and a restart), audited against the SQLite file."""

from __future__ import annotations

import http.client
import importlib.util
import json
import socket
import sqlite3
import sys
import threading
from pathlib import Path

import httpx
import pytest

from conftest import REPO_ROOT
from ratio_spark.cli.main import main
from ratio_spark.core.web import MAX_BODY_BYTES, MAX_JSON_DEPTH, json_depth

pytestmark = pytest.mark.slow  # server subprocesses

SCRIPT = REPO_ROOT / "benchmarks" / "humaneval_load.py"
_spec = importlib.util.spec_from_file_location("humaneval_load", SCRIPT)
bench = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
ANNOTATORS = [f"ann{i}" for i in range(1, 9)]


def make_study(humaneval_runs, out: Path, annotators: list[str]) -> dict:
    runs = humaneval_runs["runs"]
    code = main(["humaneval", "assign", "--set", f"tables.root={humaneval_runs['tables']}",
                 "--system", f"one={runs['unigram']}", "--system", f"two={runs['bigram']}",
                 "--annotators", ",".join(annotators), "--per-move", "4", "--out", str(out)])
    assert code == 0
    lines = out.with_suffix(".links.tsv").read_text().splitlines()[1:]
    return {name: path.removeprefix("/t/") for name, path in (line.split("\t") for line in lines)}


@pytest.fixture(scope="module")
def served(humaneval_runs, tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "study.sqlite"
    tokens = make_study(humaneval_runs, path, ["alice", "bob"])
    server = bench.Server(path)
    yield {"path": path, "tokens": tokens, "server": server, "url": server.url}
    server.stop()
    output = "".join(server.lines)
    assert not any(token in output for token in tokens.values()), "a token reached the server's output"


def rows(path: Path) -> dict:
    with sqlite3.connect(path) as conn:
        return {"labels": conn.execute("SELECT * FROM labels ORDER BY 1, 2").fetchall(),
                "answers": conn.execute("SELECT assignment_id, preference, comment FROM assignments ORDER BY 1").fetchall()}


def first_assignment(path: Path, annotator: str) -> tuple[int, str]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT a.assignment_id, l.candidate_id FROM assignments a JOIN lists l USING (query_id) "
                            "WHERE a.annotator = ? ORDER BY a.position, l.system, l.rank LIMIT 1", (annotator,)).fetchone()


def one_line(response: httpx.Response) -> str:
    """The reason of a refusal: JSON ``detail``, or Starlette's plain "Content Too Large" for a 413."""
    detail = response.text if response.status_code == 413 else response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and len(detail) <= 300, detail
    return detail


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


# ------------------------------------------------------------------------------------------- issue 33


def test_d1_an_assignment_id_beyond_sqlite_integers_is_not_found(served):
    response = httpx.get(f"{served['url']}/api/assignments/9223372036854775808", headers=bearer(served["tokens"]["alice"]))
    assert response.status_code == 404 and "no query 9223372036854775808" in one_line(response)
    for aid in ("-9223372036854775809", str(10**40)):
        assert httpx.get(f"{served['url']}/api/assignments/{aid}", headers=bearer(served["tokens"]["alice"])).status_code == 404


def test_d2_no_token_is_a_401_before_the_body_is_read(served):
    before = rows(served["path"])
    response = httpx.post(f"{served['url']}/api/assignments/1/labels", json={"candidate_id": "x", "useful": "maybe"})
    assert response.status_code == 401 and "Not signed in" in one_line(response)
    bad = httpx.post(f"{served['url']}/api/assignments/1/labels", content=b'{"candidate_id": ', headers={
        "content-type": "application/json"})
    assert bad.status_code == 401  # not even invalid JSON is looked at before the token
    assert rows(served["path"]) == before


def _raw_post(url: str, path: str, token: str, declared: int, sent: bytes) -> tuple[int, bytes]:
    """A POST that declares ``declared`` body bytes but sends only ``sent``; returns the status and the answer
    (read until the server closes the connection: it cannot keep one whose body it did not read)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall((f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n").encode() + sent)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]), answer


def test_d2b_a_10_mb_body_is_refused_with_413_before_it_is_read(served):
    aid, cid = first_assignment(served["path"], "alice")
    path, token = f"/api/assignments/{aid}/labels", served["tokens"]["alice"]
    before = rows(served["path"])
    # Only the headers and 64 KB of a declared 10 MB body are sent: the answer comes without the rest.
    status, answer = _raw_post(served["url"], path, token, 10 * 2**20, b'{"candidate_id": "' + b"x" * MAX_BODY_BYTES)
    assert status == 413 and len(answer) < 1000
    # Two whole 10 MB bodies at once (the request), a chunked one, and the app still answers at once.
    big = json.dumps({"candidate_id": "x" * (10 * 2**20), "useful": True}).encode()
    outcomes = []

    def send(chunked: bool):
        host, port = served["url"].removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            body = iter([big[i:i + 2**16] for i in range(0, len(big), 2**16)]) if chunked else big
            conn.request("POST", path, body=body, encode_chunked=chunked,
                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            response = conn.getresponse()
            outcomes.append((response.status, len(response.read())))
        except (BrokenPipeError, ConnectionResetError):
            outcomes.append(("reset", 0))  # the server answered 413 and closed before the client had sent it all
        finally:
            conn.close()

    threads = [threading.Thread(target=send, args=(chunked,)) for chunked in (False, False, True)]
    for thread in threads:
        thread.start()
    assert httpx.get(f"{served['url']}/favicon.ico", timeout=30).status_code == 204
    for thread in threads:
        thread.join(90)
    assert len(outcomes) == 3 and all(status in (413, "reset") and size < 1000 for status, size in outcomes), outcomes
    assert any(status == 413 for status, _ in outcomes)
    # A refused field under the size limit is named, never echoed back.
    response = httpx.post(served["url"] + path, headers=bearer(token), json={"candidate_id": "y" * 60_000, "useful": True})
    assert response.status_code == 422 and "candidate_id" in one_line(response) and "yyyy" not in response.text
    assert rows(served["path"]) == before


@pytest.mark.parametrize("useful", ["no", "yes", "on", 0, 1])
def test_d3_useful_is_a_json_boolean_only(served, useful):
    aid, cid = first_assignment(served["path"], "bob")
    before = rows(served["path"])
    response = httpx.post(f"{served['url']}/api/assignments/{aid}/labels", headers=bearer(served["tokens"]["bob"]),
                          json={"candidate_id": cid, "useful": useful})
    assert response.status_code == 422 and one_line(response).startswith("body.useful: Input should be a valid boolean")
    assert rows(served["path"]) == before


def test_d3_true_and_false_are_stored(served):
    aid, cid = first_assignment(served["path"], "bob")
    for value in (False, True):
        response = httpx.post(f"{served['url']}/api/assignments/{aid}/labels", headers=bearer(served["tokens"]["bob"]),
                              json={"candidate_id": cid, "useful": value})
        assert response.status_code == 200 and response.json()["labels"][cid] is value
    with sqlite3.connect(served["path"]) as conn:
        assert conn.execute("DELETE FROM labels WHERE assignment_id = ?", (aid,)).rowcount == 1  # leave the study clean


def test_a_study_locked_past_the_busy_timeout_is_a_503_never_database_is_locked(served, monkeypatch):
    """Found by the 64-annotator load test: a write that waited out SQLite's busy timeout reached the page as
    a 422 "database is locked". It waits once more, then answers 503 (not saved, send it again)."""
    from ratio_spark.core.web import ServiceThread
    from ratio_spark.humaneval.app import create_app
    from ratio_spark.humaneval.study import Study

    monkeypatch.setattr(Study, "BUSY_TIMEOUT_S", 0.3, raising=False)
    aid, cid = first_assignment(served["path"], "alice")
    before = rows(served["path"])
    with ServiceThread(create_app(served["path"])) as url:
        holder = sqlite3.connect(served["path"], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        try:
            response = httpx.post(f"{url}/api/assignments/{aid}/labels", headers=bearer(served["tokens"]["alice"]),
                                  json={"candidate_id": cid, "useful": True})
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert response.status_code == 503 and "send it again" in one_line(response)
        assert "locked" not in response.text
        assert rows(served["path"]) == before
        again = httpx.post(f"{url}/api/assignments/{aid}/labels", headers=bearer(served["tokens"]["alice"]),
                           json={"candidate_id": cid, "useful": True})
        assert again.status_code == 200
    with sqlite3.connect(served["path"]) as conn:
        conn.execute("DELETE FROM labels WHERE assignment_id = ?", (aid,))


def test_json_depth_counts_nesting_outside_strings():
    assert json_depth(b'{"a": [1, {"b": "[[[[{{{"}]}') == 3
    assert json_depth(b'"just a string"') == 0
    assert json_depth(b"[" * 50 + b"]" * 50) == 50 > MAX_JSON_DEPTH


# ------------------------------------------------------------------------------------------- issue 30: hostile input


def test_hostile_requests_get_one_line_4xx_and_store_nothing(served):
    url, tokens = served["url"], served["tokens"]
    aid, cid = first_assignment(served["path"], "alice")
    before = rows(served["path"])
    alice = tokens["alice"]
    cases = [
        ("GET", f"/api/assignments/{aid}", {}, None, 401),  # no token
        ("GET", f"/api/assignments/{aid}", bearer(tokens["bob"]), None, 403),  # another annotator's
        ("GET", f"/api/assignments/{aid}", bearer(alice.upper()), None, 401),  # changed case
        ("GET", f"/api/assignments/{aid}", bearer(alice + "x"), None, 401),  # a suffix
        ("GET", f"/api/assignments/{aid}", bearer(alice[:-1]), None, 401),  # one character short
        ("GET", f"/api/assignments/{aid}", {"Cookie": f"humaneval_token={alice}x"}, None, 401),
        ("POST", f"/api/assignments/{aid}/labels", bearer(tokens["admin"]), {"candidate_id": cid, "useful": True}, 403),
        ("POST", f"/api/assignments/{aid}/labels", bearer(alice), b"{not json", 422),
        ("POST", f"/api/assignments/{aid}/labels", bearer(alice), {"candidate_id": 5, "useful": True}, 422),
        ("POST", f"/api/assignments/{aid}/labels", bearer(alice), {"candidate_id": cid, "useful": True, "x": 1}, 422),
        ("POST", f"/api/assignments/{aid}/labels", bearer(alice), [cid, True], 422),
        ("POST", f"/api/assignments/{aid}/labels", bearer(alice), {"candidate_id": "../../etc/passwd", "useful": True}, 422),
        ("POST", f"/api/assignments/{aid}/labels", bearer(alice), {"candidate_id": cid, "useful": [[[[[[]]]]]]}, 422),
        ("POST", f"/api/assignments/{aid}/labels", bearer(alice), b"[" * 40 + b"]" * 40, 422),
        ("POST", f"/api/assignments/{aid}/preference", bearer(alice), {"preference": "C"}, 422),
        ("POST", f"/api/assignments/{aid}/preference", bearer(alice), {"preference": None}, 422),
        ("POST", f"/api/assignments/{aid}/comment", bearer(alice), {"comment": "c" * 5001}, 422),
        ("POST", f"/api/assignments/{aid}/comment", bearer(alice), {"comment": "c" * 70_000}, 413),
        ("GET", "/api/assignments/0", bearer(alice), None, 404),
        ("GET", "/api/assignments/-1", bearer(alice), None, 404),
        ("GET", "/api/assignments/abc", bearer(alice), None, 422),
        ("GET", "/api/assignments/..%2F..%2Fetc%2Fpasswd", bearer(alice), None, 404),  # no such route
        ("GET", "/api/assignments/1e3", bearer(alice), None, 422),
        ("GET", "/static/..%2F..%2Fstudy.py", {}, None, 404),
        ("GET", "/t/..%2F..%2Fetc%2Fpasswd", {}, None, 404),  # no such route
        ("GET", "/t/" + "a" * 60_000, {}, None, 401),
        ("GET", "/api/progress", bearer(alice), None, 403),
    ]
    for method, path, headers, body, expected in cases:
        content = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
        response = httpx.request(method, url + path, headers={"Content-Type": "application/json", **headers},
                                 content=content, timeout=30)
        assert response.status_code == expected, (method, path, response.status_code, response.text[:300])
        if path.startswith("/api/"):
            one_line(response)
        assert alice not in response.text
    assert rows(served["path"]) == before


def test_fuzzing_every_endpoint_from_the_openapi_document(served):
    """schemathesis generates requests that fit each operation's schema and requests that do not; with the
    annotator's token, another's, and none. No answer is a 500, every refusal is one line, nothing is stored
    unless a write was acknowledged."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis.generation import GenerationMode

    from ratio_spark.humaneval.app import create_app

    schema = schemathesis.openapi.from_dict(create_app(served["path"]).openapi())
    before = rows(served["path"])
    acknowledged = []
    seen = {"cases": 0}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/assignments/{assignment_id}/labels", "/t/{token}", "/api/progress"}
    tokens = [served["tokens"]["alice"], served["tokens"]["bob"], None]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @settings(max_examples=25, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case):
                token = tokens[seen["cases"] % len(tokens)]
                seen["cases"] += 1
                headers = dict(case.headers or {})
                if token:
                    headers["Authorization"] = f"Bearer {token}"
                response = case.call(base_url=served["url"], headers=headers, timeout=30)
                assert response.status_code < 500, (case.method, case.formatted_path, response.status_code)
                if case.method == "POST" and 200 <= response.status_code < 300:
                    acknowledged.append(case.path_parameters["assignment_id"])
                if response.status_code >= 400 and case.formatted_path.startswith("/api/"):
                    detail = response.json()["detail"]
                    assert isinstance(detail, str) and "\n" not in detail and len(detail) <= 300

            try:
                check()
            except Unsatisfiable:  # an operation with nothing to get wrong (no parameters, no body)
                assert mode == GenerationMode.NEGATIVE, operation.label
    assert seen["cases"] >= 100
    after = rows(served["path"])
    changed = {r[0] for r in set(after["labels"]) ^ set(before["labels"])} | {
        r[0] for r in set(after["answers"]) ^ set(before["answers"])}
    assert changed <= set(acknowledged)


def test_the_server_says_where_it_listens(served):
    output = "".join(served["server"].lines)
    assert served["url"].startswith("http://127.0.0.1:") and "bound to 127.0.0.1 only" in output


# ------------------------------------------------------------------------------------------- issue 30: load


def test_eight_annotators_and_conflicting_writers_then_a_sigkill_lose_no_acknowledged_answer(humaneval_runs, tmp_path):
    """benchmarks/humaneval_load.py at small size: 8 annotators at once, 4 clients on one candidate, the server
    SIGKILLed once 60 answers are acknowledged and restarted on the same file; audited before the restart and
    at the end."""
    study = tmp_path / "load.sqlite"
    tokens = make_study(humaneval_runs, study, ANNOTATORS)
    figures = bench.run_load(study, tokens, conflict_clients=4, conflict_writes=6, kill_after=60)
    assert figures["annotators"] == len(ANNOTATORS) and figures["restarts"] == 1
    assert figures["problems_after_kill"] == [] and figures["acknowledged_writes_before_kill"] >= 60
    assert figures["problems"] == [] and figures["errors"] == [] and figures["tokens_in_server_output"] == []
    assert figures["statuses"]["403"] == len(ANNOTATORS) - 1  # every write on someone else's query refused
    with sqlite3.connect(study) as conn:  # every query but the one only others wrote to was labelled in full
        unlabelled = conn.execute(
            "SELECT a.assignment_id, COUNT(DISTINCT l.candidate_id) FROM assignments a JOIN lists l USING (query_id) "
            "WHERE NOT EXISTS (SELECT 1 FROM labels b WHERE b.assignment_id = a.assignment_id AND "
            "b.candidate_id = l.candidate_id) GROUP BY a.assignment_id").fetchall()
        complete = conn.execute("SELECT COUNT(*), SUM(completed_at IS NOT NULL) FROM assignments").fetchone()
    assert [aid for aid, _ in unlabelled] == [figures["untouched_assignment"]]
    assert complete == (complete[0], complete[0] - 1)


def test_the_audit_catches_a_lost_and_a_wrong_label(tmp_path):
    """The audit can fail: a label acknowledged but missing, and one stored with another value, are reported."""
    study = tmp_path / "s.sqlite"
    bench.synthetic_study(study, annotators=2, queries_per_annotator=1)
    load = bench.Load(base=None)
    load.writes = [bench.Write("label", (1, "q00000-a0"), True, sent=1.0, acked=2.0),
                   bench.Write("label", (1, "q00000-a1"), True, sent=1.0, acked=2.0)]
    with sqlite3.connect(study) as conn:
        conn.execute("INSERT INTO labels VALUES (1, 'q00000-a1', 0, 'now')")
        conn.execute("INSERT INTO labels VALUES (2, 'q00001-a0', 1, 'now')")
    problems = bench.audit(study, load)["problems"]
    assert any("(1, 'q00000-a0') was acknowledged but is not stored" in p for p in problems)
    assert any("(1, 'q00000-a1') holds False" in p for p in problems)
    assert any("no client sent" in p for p in problems)
