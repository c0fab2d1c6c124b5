"""The Inspire search service as an outside client meets it (issues 33 and 30), on the instances of the 299
sample papers (``sample_build`` of tests/inspire/test_inspire.py), BM25 backend, served by uvicorn on 127.0.0.1.

Issue 33's defects with the exact requests of the issue (D4 a list as the tool name, D5 arguments nested
50,000 deep, D6 a run id of "..", D7 ``serve --port 0``) and the query cap; hostile requests by hand and
schema-driven fuzzing from the service's OpenAPI document (schemathesis); 16 concurrent episodes and the
date-gate audit of benchmarks/inspire_load.py at small size."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading

import httpx
import pytest

from conftest import REPO_ROOT
from ratio_spark.inspire.instances import InstanceSet
from ratio_spark.inspire.scoring import read_trajectory
from ratio_spark.inspire.search import DateGatedSearch, SearchCorpus, make_backend
from ratio_spark.inspire.service import MAX_QUERY_CHARS, InspireService, ServiceThread, create_app
from test_inspire import sample_build  # noqa: F401  (the module fixture: instances of the sample)

SCRIPT = REPO_ROOT / "benchmarks" / "inspire_load.py"
_spec = importlib.util.spec_from_file_location("inspire_load", SCRIPT)
bench = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture(scope="module")
def served(sample_build):  # noqa: F811
    config, _, _, root = sample_build
    instances = InstanceSet.load(root / "instances" / "v1")
    corpus = SearchCorpus.load(instances.corpus_path)
    search = DateGatedSearch(corpus, make_backend("bm25", corpus, config.inspire.search.fields))
    settings = config.inspire.search.model_copy(update={"budget": 1000})
    service = InspireService(instances, search, settings, config.inspire.scoring, root / "service-trajectories")
    with ServiceThread(create_app(service)) as url:
        yield {"service": service, "url": url, "iid": next(iter(instances.instances)), "root": root}


def start(served, run_id: str = "probe") -> str:
    response = httpx.post(f"{served['url']}/episodes", json={"instance_id": served["iid"], "run_id": run_id})
    assert response.status_code == 200, response.text
    return response.json()["episode_id"]


def one_line(response: httpx.Response) -> str:
    """The reason of a refusal: JSON ``detail`` (Starlette's plain "Content Too Large" for a 413)."""
    detail = response.text if response.status_code == 413 else response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and len(detail) <= 300, detail
    return detail


def errors_of(served, episode_id: str) -> list[dict]:
    run_id = episode_id.split(".", 1)[0]
    return read_trajectory(served["service"].trajectories / run_id / f"{episode_id}.jsonl").errors


# ------------------------------------------------------------------------------------------- issue 33


def test_d4_a_list_or_an_object_as_the_tool_name_is_a_422_logged_as_a_malformed_call(served):
    eid = start(served, "d4")
    for name in (["search_papers"], {"tool": "search_papers"}):
        response = httpx.post(f"{served['url']}/episodes/{eid}/call", json={"name": name, "arguments": {}})
        assert response.status_code == 422 and one_line(response).startswith("body.name")
    assert [e["kind"] for e in errors_of(served, eid)] == ["unknown_tool", "unknown_tool"]
    assert httpx.get(f"{served['url']}/episodes/{eid}").json()["calls"] == 2  # counted like the other malformed calls


def test_d5_arguments_nested_deep_are_refused_not_a_500(served):
    eid = start(served, "d5")
    deep = '{"name": "search_papers", "arguments": ' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "}"
    response = httpx.post(f"{served['url']}/episodes/{eid}/call", content=deep, headers={"content-type": "application/json"})
    assert response.status_code == 413 and one_line(response)  # the request: over the 64 KB limit
    within = '{"name": "search_papers", "arguments": ' + "[" * 5000 + "]" * 5000 + "}"  # 10 KB, 5,000 deep
    response = httpx.post(f"{served['url']}/episodes/{eid}/call", content=within, headers={"content-type": "application/json"})
    assert response.status_code == 422 and "nested deeper than 32 levels" in one_line(response)
    assert [e["kind"] for e in errors_of(served, eid)] == ["malformed_arguments"]


@pytest.mark.parametrize("run_id", ["..", ".", ".hidden", "../escape", "a/b", "", "x" * 101])
def test_d6_a_run_id_cannot_leave_the_trajectories_folder(served, run_id):
    folder = served["service"].trajectories
    before = sorted(p.name for p in folder.parent.iterdir())
    response = httpx.post(f"{served['url']}/episodes", json={"instance_id": served["iid"], "run_id": run_id})
    assert response.status_code == 422 and one_line(response).startswith("body.run_id")
    assert sorted(p.name for p in folder.parent.iterdir()) == before
    with pytest.raises(ValueError, match="run_id"):  # the service itself refuses it too (callers without HTTP)
        served["service"].start(served["iid"], run_id)


def test_d7_serve_on_port_0_prints_the_port_it_bound_and_where(served, tmp_path):
    service = bench.Service(served["root"] / "instances" / "v1", tmp_path / "trajectories")
    try:
        assert service.url.startswith("http://127.0.0.1:") and not service.url.endswith(":0")
        assert httpx.get(service.url + "/health").json()["ok"] is True
        assert "bound to 127.0.0.1 only" in "".join(service.lines)
    finally:
        service.stop()


def test_a_10_mb_query_is_a_413_and_a_long_one_a_clear_refusal(served):
    eid = start(served, "cap")
    health: list[int] = []

    def poll():
        health.append(httpx.get(f"{served['url']}/health", timeout=60).status_code)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        response = httpx.post(f"{served['url']}/episodes/{eid}/search_papers",
                              json={"query": "parsing " * (10 * 2**20 // 8)}, timeout=60)
        status = response.status_code
    except (httpx.WriteError, httpx.RemoteProtocolError):
        status = 413  # refused and closed before the whole body was sent (the 413 itself: the raw-socket test)
    poller.join()
    assert status == 413 and health == [200]
    long = httpx.post(f"{served['url']}/episodes/{eid}/search_papers", json={"query": "q" * 10_000})
    answer = long.json()
    assert long.status_code == 200 and answer["ok"] is False and answer["error"] == "invalid_arguments"
    assert answer["detail"] == f"query: at most {MAX_QUERY_CHARS} characters (got 10000)"  # measured, not echoed
    assert httpx.get(f"{served['url']}/episodes/{eid}").json()["remaining_searches"] == 1000  # not a search


# ------------------------------------------------------------------------------------------- issue 30: hostile input


def test_hostile_requests_get_one_line_refusals_never_a_500(served):
    url = served["url"]
    eid = start(served, "hostile")
    http_refusals = [
        ("POST", "/episodes/no-such-episode/call", {"name": "search_papers"}, 404),
        ("POST", "/episodes/no-such-episode/call", b"{not json", 404),  # the episode is checked before the body
        ("GET", "/episodes/..%2F..%2Fetc%2Fpasswd", None, 404),
        ("GET", "/episodes/" + "e" * 10_000, None, 404),
        ("POST", "/episodes", {"instance_id": "no-such-instance", "run_id": "x"}, 400),
        ("POST", "/episodes", {"instance_id": served["iid"], "run_id": "x", "extra": 1}, 422),
        ("POST", "/episodes", {"instance_id": 5}, 422),
        ("POST", "/episodes", [served["iid"]], 422),
        ("POST", "/episodes", b"{not json", 422),
        ("POST", f"/episodes/{eid}/call", b"{not json", 422),
        ("POST", f"/episodes/{eid}/call", {"name": "search_papers", "arguments": 5}, 422),
        ("POST", f"/episodes/{eid}/search_papers", ["a query"], 422),
        ("POST", f"/episodes/{eid}/finish", {"reason": 5}, 422),
    ]
    for method, path, body, expected in http_refusals:
        content = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
        response = httpx.request(method, url + path, content=content, headers={"content-type": "application/json"})
        assert response.status_code == expected, (path, body, response.status_code, response.text[:300])
        one_line(response)
    tool_refusals = [  # what a model can get wrong: a tool-level error it can read and recover from
        ({"query": ""}, "invalid_arguments"), ({"query": 5}, "invalid_arguments"),
        ({"query": "parsing", "limit": -1}, "invalid_arguments"), ({"query": "parsing", "limit": 10**30}, "invalid_arguments"),
        ({"query": "parsing", "limit": True}, "invalid_arguments"), ({"query": "parsing", "limit": 2.5}, "invalid_arguments"),
        ({"query": "parsing", "limit": 0}, "invalid_arguments"), ({"limit": 5}, "invalid_arguments"),
    ]
    for arguments, kind in tool_refusals:
        answer = httpx.post(f"{url}/episodes/{eid}/search_papers", json=arguments).json()
        assert answer["ok"] is False and answer["error"] == kind and "\n" not in answer["detail"], arguments
    raw = httpx.post(f"{url}/episodes/{eid}/call", json={"name": "search_papers", "arguments": '{"query": 1e400}'}).json()
    assert raw["error"] == "invalid_arguments"
    kinds = [e["kind"] for e in errors_of(served, eid)]
    assert kinds.count("malformed_arguments") == 3 and kinds.count("invalid_arguments") == len(tool_refusals) + 1
    assert httpx.get(f"{url}/episodes/{eid}").json()["status"] == "running"


@pytest.mark.slow
def test_fuzzing_every_endpoint_from_the_openapi_document(served):
    """schemathesis generates requests that fit each operation's schema and requests that do not, half of them
    on a live episode. No answer is a 500; every refusal is one line."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis.generation import GenerationMode

    schema = schemathesis.openapi.from_dict(httpx.get(served["url"] + "/openapi.json").json())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 8
    live = {"episode_id": start(served, "fuzz")}
    seen = {"cases": 0, "refused": 0}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            on_live = [None, live] if "{episode_id}" in operation.path else [None]
            for path_parameters in on_live:
                @settings(max_examples=15, deadline=None, derandomize=True, database=None,
                          suppress_health_check=list(HealthCheck))
                @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
                def check(case):
                    seen["cases"] += 1
                    response = case.call(base_url=served["url"], timeout=60)
                    assert response.status_code < 500, (case.method, case.formatted_path, response.text[:300])
                    if response.status_code >= 400:
                        seen["refused"] += 1
                        one_line(response)
                    elif case.path.endswith("/call") or case.path.endswith("_papers") or case.path.endswith("_answer"):
                        answer = response.json()
                        assert answer["ok"] or "\n" not in answer["detail"]

                try:
                    check()
                except Unsatisfiable:  # nothing to get wrong (no parameters, no body)
                    assert mode == GenerationMode.NEGATIVE, operation.label
    assert seen["cases"] >= 100 and seen["refused"] >= 20


# ------------------------------------------------------------------------------------------- issue 30: load and the gate


@pytest.mark.slow
def test_16_concurrent_episodes_and_the_date_gate_audit(served, tmp_path):
    """benchmarks/inspire_load.py at small size: 16 episodes at once over ``inspire serve`` (no error), then
    every instance searched with 120 generated queries aimed at what its gate hides, and crafted submissions:
    no result and no accepted id on or after the cutoff, never the target."""
    folder = served["root"] / "instances" / "v1"
    service = bench.Service(folder, tmp_path / "trajectories", ["inspire.search.budget=200"])
    try:
        ids = list(InstanceSet.load(folder).instances)
        load = bench.load_episodes(service.url, ids, episodes=16, searches=4)
        assert load["error_count"] == 0, load["errors"]
        assert load["requests"] == 16 * (1 + 4 + 1)
        gate = bench.gate_audit(service.url, folder, queries_per_instance=120, max_limit=20)
    finally:
        service.stop()
    assert gate["violation_count"] == 0, gate["violations"]
    assert gate["instances"] == len(ids) and gate["queries"] >= 1000 and gate["results_checked"] > 5000
    assert gate["accepted_ids_checked"] >= len(ids) // 2  # the positive control: a visible id is accepted
    # The queries are aimed right: without the gate, many would find a paper the gate hides.
    search, instances = served["service"].search, InstanceSet.load(folder)
    import random

    import numpy as np

    aimed = 0
    for instance in instances.instances.values():
        for query in bench.gate_queries(instance, search.corpus, random.Random(1), 20):
            top = int(np.argmax(search.backend.scores(query)))
            aimed += search.corpus.dates[top] >= np.datetime64(instance.cutoff, "D")
    assert aimed >= len(instances.instances) * 5
