"""Inspire on our corpus: instance build, the date gate, the service's tool calls, baselines, scoring.

The instance tests run on the 299 real sample papers: the readers parse them (pure Python), and the test
writes the papers / sentences / references Delta tables itself with deltalake, resolving references by an
exact title match of its own, so no Spark is needed here (the Spark side is tests/pipeline/ingest/test_references.py).
Scoring is checked on constructed trajectories against values computed by hand in the comments.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import math
import random
import re
from pathlib import Path

import pandas as pd
import pytest

from ratio_spark.config import load_config
from ratio_spark.inspire import agent
from ratio_spark.inspire.build import build_instances, months_before
from ratio_spark.inspire.instances import InstanceSet
from ratio_spark.inspire.reports import write_reports
from ratio_spark.inspire.scoring import (ScoringError, Trajectory, aggregate, check_nesting, episode_metrics,
                                         read_trajectory)
from ratio_spark.inspire.search import DateGatedSearch, SearchCorpus, make_backend
from ratio_spark.inspire.service import InspireService, ServiceThread, create_app
from ratio_spark.inspire.stats import bootstrap_mean_ci, paired_bootstrap_ci
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.pipeline.ingest.tei import parse_tei

from conftest import REPO_ROOT

SAMPLE = REPO_ROOT / "data" / "sample" / "acl-emnlp-tei"


def title_key(title: str | None) -> str:
    return re.sub(r"[\W_]+", " ", (title or "").lower()).strip()


def write_sample_tables(root: Path) -> dict[str, pd.DataFrame]:
    """papers, sentences (abstracts, split at sentence ends) and references of the sample, as Delta tables."""
    import pyarrow as pa
    from deltalake import write_deltalake

    options = ReaderOptions(input_name="sample", format="tei", exclude_path_regex=r"-\d000\.tei\.xml(\.gz)?$")
    papers = []
    for path in sorted(SAMPLE.glob("*.tei.xml.gz")):
        [record] = parse_tei(gzip.decompress(path.read_bytes()), str(path), options)
        if record.get("reject_reason") is None and not re.search(options.exclude_path_regex, str(path)):
            papers.append(record)
    by_title = {title_key(p["title"]): p for p in papers}
    sentences, references = [], []
    for paper in papers:
        pid = paper["paper_id"]
        if paper["sections"][0]["heading"] == "Abstract":
            for para_idx, text in enumerate(paper["sections"][0]["paragraphs"]):
                for sent_idx, sentence in enumerate(re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)):
                    sentences.append({"paper_id": pid, "sentence_id": f"{pid}:0:{para_idx}:{sent_idx}", "section_idx": 0,
                                      "section_heading": "Abstract", "para_idx": para_idx, "sent_idx": sent_idx,
                                      "text": sentence})
        bibliography = paper["bibliography"]
        for entry_idx, entry in enumerate(bibliography["entries"]):
            hit = by_title.get(title_key(entry["title"])) if len(title_key(entry["title"]).split()) >= 3 else None
            resolved = hit is not None and hit["paper_id"] != pid
            mentions = [m for m in bibliography["mentions"] if m["entry_id"] == entry["entry_id"]]
            references.append({
                "paper_id": pid, "entry_idx": entry_idx, "entry_id": entry["entry_id"],
                "resolved_paper_id": hit["paper_id"] if resolved else None,
                "resolved_pub_date": hit["pub_date"] if resolved else None,
                "resolution_status": "resolved" if resolved else "no_match", "mention_count": len(mentions),
                "mention_sections": [paper["sections"][m["section_idx"]]["heading"] for m in mentions],
                "mention_sentence_ids": [],
            })
    frames = {
        "papers": pd.DataFrame([{k: p[k] for k in ("paper_id", "title", "pub_date", "sections")} for p in papers]),
        "sentences": pd.DataFrame(sentences),
        "references": pd.DataFrame(references),
    }
    schemas = {"references": pa.schema([
        ("paper_id", pa.string()), ("entry_idx", pa.int32()), ("entry_id", pa.string()),
        ("resolved_paper_id", pa.string()), ("resolved_pub_date", pa.date32()), ("resolution_status", pa.string()),
        ("mention_count", pa.int64()), ("mention_sections", pa.list_(pa.string())),
        ("mention_sentence_ids", pa.list_(pa.string()))])}
    for name, frame in frames.items():
        table = pa.Table.from_pandas(frame, schema=schemas.get(name), preserve_index=False)
        write_deltalake(str(root / name), table)
    return frames


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspire")
    frames = write_sample_tables(root / "tables")
    config = load_config(None, [f"tables.root={root / 'tables'}", f"inspire.root={root / 'instances'}",
                                "inspire.targets.start=2017-06-01", "inspire.targets.end=2018-12-31",
                                "inspire.search.budget=3", f"llm.cache_dir={root / 'llm'}"])
    manifest = build_instances(config.inspire, config.tables.location, log=lambda *_: None)
    return config, manifest, frames, root


# ----------------------------------------------------------------------------------------- build


def test_months_before():
    assert months_before(dt.date(2018, 1, 1), 3) == dt.date(2017, 10, 1)
    assert months_before(dt.date(2018, 5, 31), 3) == dt.date(2018, 2, 28)
    assert months_before(dt.date(2020, 5, 31), 3) == dt.date(2020, 2, 29)


def test_build_writes_hashed_instances_with_cutoffs_tiers_and_briefs(sample_build):
    config, manifest, frames, root = sample_build
    folder = root / "instances" / "v1"
    papers = frames["papers"].set_index("paper_id")
    refs = frames["references"]
    rules = config.inspire.grading
    method = re.compile(rules.method_heading_regex)
    assert manifest["counts"]["instances"] == len(manifest["splits"]["eval"]) >= 5
    for iid in manifest["splits"]["eval"]:
        path = folder / manifest["instances"][iid]["file"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == manifest["instances"][iid]["sha256"]
        data = json.loads(path.read_text())
        target = data["evaluator"]["target"]
        assert target["paper_id"] not in json.dumps(data["policy"])  # the policy block never names the target
        date = papers.pub_date[target["paper_id"]]
        cutoff = (pd.Timestamp(date) - pd.DateOffset(months=3)).date()
        assert data["policy"]["cutoff"] == str(cutoff)
        oldest = (pd.Timestamp(date) - pd.DateOffset(years=4)).date()
        antecedents = data["evaluator"]["antecedents"]
        assert len(antecedents) >= 2
        for a in antecedents:
            assert oldest <= dt.date.fromisoformat(a["pub_date"]) < cutoff
            rows = refs[(refs.paper_id == target["paper_id"]) & (refs.resolved_paper_id == a["paper_id"])]
            mentions = int(rows.mention_count.sum())
            headings = [h for hs in rows.mention_sections for h in hs]
            in_method = any(method.search(h or "") for h in headings)
            # The documented default rule, restated.
            tier = 3 if mentions >= 3 and in_method else 2 if mentions >= 2 or (mentions >= 1 and in_method) else 1
            assert (a["tier"], a["gain"], a["mention_count"]) == (tier, {1: 1.0, 2: 3.0, 3: 7.0}[tier], mentions)
        for c in data["evaluator"]["excluded_concurrent"]:
            assert dt.date.fromisoformat(c["pub_date"]) >= cutoff
        # The extractive brief is the abstract's opening, before the first contribution sentence.
        abstract = " ".join(papers.sections[target["paper_id"]][0]["paragraphs"])
        assert abstract.startswith(data["policy"]["brief"]) and len(data["policy"]["brief"]) < len(abstract)
    assert manifest["corpus"]["sha256"] == hashlib.sha256((folder / "corpus.parquet").read_bytes()).hexdigest()


def test_targets_with_fewer_than_two_graded_antecedents_are_dropped_and_counted(sample_build):
    config, manifest, frames, _ = sample_build
    papers = frames["papers"].set_index("paper_id")
    refs = frames["references"]
    window = papers[(papers.pub_date >= dt.date(2017, 6, 1)) & (papers.pub_date <= dt.date(2018, 12, 31))]
    too_few = 0
    for pid, row in window.iterrows():
        cutoff = (pd.Timestamp(row.pub_date) - pd.DateOffset(months=3)).date()
        oldest = (pd.Timestamp(row.pub_date) - pd.DateOffset(years=4)).date()
        cited = refs[(refs.paper_id == pid) & refs.resolved_paper_id.notna()].groupby("resolved_paper_id").agg(
            mentions=("mention_count", "sum"), date=("resolved_pub_date", "first"))
        graded = cited[(cited.mentions >= 1) & cited.date.map(lambda d: oldest <= d < cutoff)]
        too_few += len(graded) < 2
    assert manifest["counts"]["dropped_fewer_than_2_antecedents"] == too_few > 0
    assert manifest["counts"]["targets_considered"] == len(window)


# ----------------------------------------------------------------------------------------- the date gate


@pytest.fixture(scope="module")
def bm25_service(sample_build):
    config, _, _, root = sample_build
    instances = InstanceSet.load(root / "instances" / "v1")
    corpus = SearchCorpus.load(instances.corpus_path)
    search = DateGatedSearch(corpus, make_backend("bm25", corpus, config.inspire.search.fields))
    return InspireService(instances, search, config.inspire.search, config.inspire.scoring, root / "trajectories")


def _gate_queries(instance, corpus: SearchCorpus, rng: random.Random) -> list[str]:
    """The target's title, the brief, and titles and abstracts of papers on or after the cutoff."""
    later = [i for i, d in enumerate(corpus.dates) if d >= pd.Timestamp(instance.cutoff).to_datetime64()]
    picked = rng.sample(later, min(15, len(later)))
    target = corpus.ids.index(instance.target_id)
    return [corpus.titles[target], corpus.abstracts[target][:300], instance.brief,
            *[corpus.titles[i] for i in picked], *[corpus.abstracts[i][:200] for i in picked[:5]]]


@pytest.mark.parametrize("backend,max_instances,max_queries", [("bm25", None, None), ("dense:minilm", 6, 6)])
def test_no_response_ever_holds_the_target_or_a_paper_on_or_after_the_cutoff(sample_build, backend, max_instances,
                                                                            max_queries):
    """Every instance, queried with its own target's title and abstract, its brief, and the titles and abstracts
    of papers published on or after its cutoff (dense: fewer, each query is a model call on a loaded CPU)."""
    config, _, _, root = sample_build
    instances = InstanceSet.load(root / "instances" / "v1")
    corpus = SearchCorpus.load(instances.corpus_path)
    search = DateGatedSearch(corpus, make_backend(backend, corpus, config.inspire.search.fields))
    service = InspireService(instances, search, config.inspire.search.model_copy(update={"budget": 100}),
                             config.inspire.scoring, root / f"gate-{backend.replace(':', '-')}")
    dates = dict(zip(corpus.ids, corpus.dates))
    rng = random.Random(0)
    reachable_if_ungated = 0
    checked = list(instances.instances.values())[:max_instances]
    for instance in checked:
        episode = service.start(instance.instance_id, "gate")
        queries = _gate_queries(instance, corpus, rng)[:max_queries]
        target_row = corpus.ids.index(instance.target_id)
        reachable_if_ungated += int(search.backend.scores(queries[0]).argmax() == target_row)
        for query in queries:
            answer = service.call(service.episode(episode["episode_id"]), "search_papers",
                                  {"query": query, "limit": config.inspire.search.max_limit})
            assert answer["ok"]
            for result in answer["results"]:
                assert result["paper_id"] != instance.target_id
                assert dates[result["paper_id"]] < pd.Timestamp(instance.cutoff).to_datetime64()
        later = next(pid for pid, d in dates.items() if d >= pd.Timestamp(instance.cutoff).to_datetime64()
                     and pid != instance.target_id)
        done = service.call(service.episode(episode["episode_id"]), "submit_answer",
                            {"paper_ids": [instance.target_id, later]})
        assert done["submitted"] == [] and done["dropped"]["not_visible"] == 2
    # Without the gate the target's own title finds the target: the gate is what keeps it out.
    assert reachable_if_ungated >= len(checked) * 0.8


# ----------------------------------------------------------------------------------------- the service over HTTP


def test_tool_calls_over_http_log_every_error_and_a_finished_episode_refuses_more(bm25_service):
    service = bm25_service
    iid = next(iter(service.instances.instances))
    with ServiceThread(create_app(service)) as url:
        client = agent.ServiceClient(url)
        episode = client.start(iid, "http")
        eid = episode["episode_id"]
        assert set(episode) >= {"brief", "cutoff", "search_budget", "tools"} and "target" not in json.dumps(episode)
        assert client.call(eid, "search", {"query": "x"})["error"] == "unknown_tool"
        assert client.call(eid, "search_papers", '{"query": "parsing", "limit": ')["error"] == "malformed_arguments"
        assert client.call(eid, "search_papers", {"query": "parsing", "limit": 0})["error"] == "invalid_arguments"
        assert client.call(eid, None, "I think the answer is BERT.")["error"] == "no_tool_call"
        found = [client.call(eid, "search_papers", '{"query": "neural machine translation"}') for _ in range(3)]
        assert all(f["ok"] for f in found) and found[-1]["remaining_searches"] == 0
        assert client.call(eid, "search_papers", {"query": "again"})["error"] == "budget_exhausted"
        exposed = [r["paper_id"] for r in found[0]["results"]]
        unseen = next(pid for pid in service.search.corpus.ids if pid not in exposed
                      and service.search.visible(service.episode(eid).instance.cutoff, set())[service.search.index[pid]])
        done = client.call(eid, "submit_answer", {"paper_ids": [exposed[1], exposed[1], unseen, exposed[0]]})
        assert done["submitted"] == [exposed[1], exposed[0]]
        assert done["dropped"] == {"duplicate": 1, "not_visible": 0, "not_exposed": 1}
        assert client.call(eid, "search_papers", {"query": "late"})["error"] == "episode_finished"
        client.close()
    trajectory = read_trajectory(service.trajectories / "http" / f"{eid}.jsonl")
    assert [e["kind"] for e in trajectory.errors] == ["unknown_tool", "malformed_arguments", "invalid_arguments",
                                                      "no_tool_call", "budget_exhausted"]
    assert trajectory.queries == ["neural machine translation"] * 3 and trajectory.calls == 9  # the late call is refused, not counted
    assert trajectory.status == "submitted" and trajectory.ranking == [exposed[1], exposed[0]]
    metrics = episode_metrics(service.instances.get(iid).gains, trajectory)
    assert metrics["malformed_calls"] == 4 and metrics["duplicate_queries"] == 2 and metrics["searches"] == 3


def test_one_shot_baselines_through_the_service_and_the_scorer(sample_build, bm25_service, tmp_path):
    config, _, _, _ = sample_build
    service = bm25_service
    runs = {}
    with ServiceThread(create_app(service)) as url:
        client = agent.ServiceClient(url)
        records = [agent.one_shot(client, iid, "one-shot-bm25", 10, "one-shot:bm25") for iid in service.instances.instances]
        client.close()
    assert {r.status for r in records} <= {"submitted", "empty_submission"}
    runs["one-shot-bm25"] = service.trajectories / "one-shot-bm25"
    summaries = write_reports(service.instances, runs, config.inspire.scoring, tmp_path / "scores")
    s = summaries["one-shot-bm25"]
    assert s["expected"] == s["scored"] == len(service.instances.instances) == s["attempted"]
    assert s["calls"] == 2.0 and s["duplicate_queries"] == 0
    # One search, the submission is what it returned: nothing is lost to selection, only to ranking.
    assert s["g_selected"] == pytest.approx(s["g_exposed"]) and s["ndcg"] <= s["g_selected"] + 1e-12
    assert 0 < s["g_exposed"] < 1
    episodes = pd.read_csv(tmp_path / "scores" / "episodes.csv")
    assert episodes.ndcg.mean() == pytest.approx(s["ndcg"])
    assert (tmp_path / "scores" / "funnel.png").stat().st_size > 1000
    assert "nDCG@10" in (tmp_path / "scores" / "results.md").read_text()


# ----------------------------------------------------------------------------------------- scoring


def test_metrics_of_a_constructed_trajectory_match_the_hand_computation():
    labels = {"A": 7.0, "B": 3.0, "C": 1.0}
    trajectory = Trajectory("e", "r", "i", queries=["q1", "Q1 ", "q2"], returned=[["A", "X"], ["B", "Y", "A"], []],
                            ranking=["X", "B"], status="submitted", calls=4)
    row = episode_metrics(labels, trajectory)
    idcg = 7 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4)  # 7 + 1.892789 + 0.5 = 9.392789
    assert row["ndcg"] == pytest.approx((3 / math.log2(3)) / idcg)  # B at rank 2: 0.201514
    assert row["ndcg"] == pytest.approx(0.2015148, abs=1e-6)
    assert row["g_selected"] == pytest.approx(3 / idcg)  # {B} in the best order: 3 / 9.392789 = 0.319394
    assert row["g_exposed"] == pytest.approx((7 + 3 / math.log2(3)) / idcg)  # {A, B}: 0.946768
    assert (row["recall"], row["mrr"], row["any_hit"], row["hits"]) == (pytest.approx(1 / 3), 0.5, 1, 1)
    assert (row["hits_ge_1"], row["hits_ge_3"], row["hits_ge_5"]) == (1, 0, None)  # 3 labels: no 5-hit target
    assert row["exposure_recall"] == pytest.approx(2 / 3) and row["zero_exposure"] == 0
    assert row["duplicate_queries"] == 1 and row["unique_ids_per_call"] == pytest.approx(4 / 4)
    assert row["ndcg"] <= row["g_selected"] <= row["g_exposed"] <= 1
    failed = episode_metrics(labels, Trajectory("e", "r", "i", returned=[["C"]], status="no_submission", calls=7))
    assert failed["ndcg"] == failed["recall"] == failed["mrr"] == failed["g_selected"] == 0
    assert failed["g_exposed"] == pytest.approx(1 / idcg)  # C was exposed: gain 1 at rank 1, 1 / 9.392789
    missing = episode_metrics(labels, None)
    assert missing["status"] == "missing" and missing["ndcg"] == 0 and missing["g_exposed"] == 0


def test_aggregates_use_ratios_of_means_and_multi_hit_only_over_eligible_targets():
    rows = [
        {**episode_metrics({"A": 7.0, "B": 3.0, "C": 1.0},
                           Trajectory("1", "r", "1", returned=[["A", "B", "C"]], ranking=["C", "B", "A"], status="submitted", calls=2))},
        {**episode_metrics({"D": 1.0, "E": 1.0},
                           Trajectory("2", "r", "2", returned=[["D", "F"]], ranking=["F"], status="submitted", calls=2))},
    ]
    out = aggregate(rows)
    # Row 1: everything exposed and submitted, reversed: G_exposed = G_selected = 1, nDCG = DCG(1,3,7)/IDCG.
    idcg1 = 7 + 3 / math.log2(3) + 0.5
    ndcg1 = (1 + 3 / math.log2(3) + 7 / 2) / idcg1
    # Row 2: D exposed, nothing relevant submitted: G_exposed = 1 / (1 + 1/log2 3), G_selected = nDCG = 0.
    gexp2 = 1 / (1 + 1 / math.log2(3))
    assert out["ndcg"] == pytest.approx(ndcg1 / 2)
    assert out["gain_kept"] == pytest.approx((1 / 2) / ((1 + gexp2) / 2))
    assert out["rank_quality"] == pytest.approx((ndcg1 / 2) / (1 / 2))
    assert out["hits_ge_3"] == 1.0 and out["hits_ge_3_targets"] == 1  # only the 3-label target is eligible
    assert out["hits_ge_1"] == 0.5 and out["zero_exposure"] == 0.0
    assert (out["expected"], out["submitted"]) == (2, 2)


def test_nesting_holds_on_random_trajectories_and_the_check_can_fail():
    rng = random.Random(7)
    for _ in range(300):
        ids = [f"p{i}" for i in range(30)]
        labels = {pid: rng.choice([1.0, 3.0, 7.0]) for pid in rng.sample(ids, rng.randint(2, 12))}
        returned = [rng.sample(ids, rng.randint(0, 8)) for _ in range(rng.randint(1, 4))]
        exposed = list(dict.fromkeys(p for r in returned for p in r))
        ranking = rng.sample(exposed, min(len(exposed), rng.randint(0, 10)))
        row = episode_metrics(labels, Trajectory("e", "r", "i", returned=returned, ranking=ranking,
                                                 status="submitted" if ranking else "empty_submission", calls=3))
        check_nesting(row, exposed_only=True)
    with pytest.raises(ScoringError):
        check_nesting({"ndcg": 0.5, "g_selected": 0.4, "g_exposed": 0.9}, exposed_only=True)
    with pytest.raises(ScoringError):
        check_nesting({"ndcg": 0.1, "g_selected": 0.6, "g_exposed": 0.5}, exposed_only=True)
    check_nesting({"ndcg": 0.1, "g_selected": 0.6, "g_exposed": 0.5}, exposed_only=False)


def test_bootstrap_intervals():
    values = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0] * 5
    mean, low, high = bootstrap_mean_ci(values, resamples=2000, seed=1)
    assert mean == pytest.approx(0.5) and low < 0.5 < high and high - low < 0.4
    diff, low, high = paired_bootstrap_ci(values, [v + 0.1 for v in values])
    assert (diff, low, high) == pytest.approx((0.1, 0.1, 0.1))
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1.0, 2.0], [1.0])


# ----------------------------------------------------------------------------------------- the LLM side


def test_chat_with_tools_sends_tools_returns_raw_calls_and_caches_them(tmp_path):
    """A mocked transport: the exact request body, and a 500 that must not be cached, need a scripted server."""
    import httpx

    from ratio_spark.llm import LLMClient, LLMConfig, ModelEndpoint, ToolChatRequest

    bodies = []
    answers = [httpx.Response(500, json={"error": {"message": "boom"}}), httpx.Response(200, json={
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                     "tool_calls": [{"id": "call_1", "type": "function", "function": {
                         "name": "search_papers", "arguments": '{"query": "parsing", "li'}}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}})]

    def handler(request):
        bodies.append(json.loads(request.content))
        return answers.pop(0)

    endpoint = ModelEndpoint(name="mock", model="m", base_url="http://mock.invalid/v1", api_key_env="UNSET_KEY_X",
                             max_retries=0, fold_system_prompt=True)
    client = LLMClient(LLMConfig(models=[endpoint], cache_dir=str(tmp_path)),
                       http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    tools = [{"type": "function", "function": {"name": "search_papers", "parameters": {"type": "object"}}}]
    request = ToolChatRequest("t1", [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], tools,
                              {"type": "function", "function": {"name": "search_papers"}}, 50)
    failed = client.chat_with_tools(request, "mock")
    assert failed.error == "http_500" and failed.tool_calls == [] and not failed.cached
    result = client.chat_with_tools(request, "mock")
    assert result.tool_calls == [{"id": "call_1", "name": "search_papers", "arguments": '{"query": "parsing", "li'}]
    assert (result.finish_reason, result.prompt_tokens, result.cached) == ("tool_calls", 9, False)
    assert bodies[1]["tools"] == tools and bodies[1]["tool_choice"]["function"]["name"] == "search_papers"
    assert bodies[1]["messages"] == [{"role": "user", "content": "S\n\nU"}] and "response_format" not in bodies[1]
    again = client.chat_with_tools(request, "mock")
    assert again.cached and again.tool_calls == result.tool_calls and len(bodies) == 2


@pytest.fixture(scope="module")
def small_service(sample_build):
    """Few, short results: every prompt of the 270M model stays well inside its 2048-token context."""
    config, _, _, root = sample_build
    instances = InstanceSet.load(root / "instances" / "v1")
    corpus = SearchCorpus.load(instances.corpus_path)
    settings = config.inspire.search.model_copy(update=dict(budget=2, snippet_chars=120))
    search = DateGatedSearch(corpus, make_backend("bm25", corpus, settings.fields))
    return InspireService(instances, search, settings, config.inspire.scoring, root / "llm-trajectories")


def _local_client(llm_server, tmp_path):
    from ratio_spark.llm import LLMClient, LLMConfig

    endpoint = llm_server.endpoint("gemma-local").model_copy(update={"max_concurrency": 1})
    return LLMClient(LLMConfig(models=[endpoint], cache_dir=str(tmp_path / "llm")))


@pytest.mark.llm
@pytest.mark.slow
def test_an_agent_episode_with_the_real_local_model_end_to_end(sample_build, small_service, llm_server, tmp_path):
    """Plumbing with gemma 3 270M: named tool choice (llama-cpp-python's gemma format supports only that),
    tool results as user turns (it drops tool messages), submission constrained to exposed ids."""
    config = sample_build[0]
    settings = config.inspire.agent.model_copy(update=dict(
        model="gemma-local", tool_choice="scripted", tool_results_role="user", constrain_submission=True,
        scripted_searches=1, max_turns=2, max_tokens=120))
    client = _local_client(llm_server, tmp_path)
    iid = next(iter(small_service.instances.instances))
    with ServiceThread(create_app(small_service)) as url:
        service = agent.ServiceClient(url)
        record = agent.agent_episode(service, client, "gemma-local", iid, "gemma", settings)
        trajectory = read_trajectory(small_service.trajectories / "gemma" / f"{record.episode_id}.jsonl")
        rerun = agent.agent_episode(service, client, "gemma-local", iid, "gemma", settings)
        service.close()
    assert record.turns >= 2 and not record.llm_errors and record.prompt_tokens > 0
    assert trajectory.queries and all(q.strip() for q in trajectory.queries)  # the model wrote the query
    assert trajectory.status == record.status in ("submitted", "empty_submission", "no_submission")
    assert set(trajectory.ranking) <= set(trajectory.exposed)
    row = episode_metrics(small_service.instances.get(iid).gains, trajectory)
    check_nesting(row, exposed_only=True)
    # Temperature 0 and the cache: the rerun replays every turn from the cache and logs the same episode.
    again = read_trajectory(small_service.trajectories / "gemma" / f"{rerun.episode_id}.jsonl")
    assert rerun.cached_turns == rerun.turns == record.turns
    assert (again.queries, again.ranking, again.status) == (trajectory.queries, trajectory.ranking, trajectory.status)


@pytest.mark.llm
@pytest.mark.slow
def test_malformed_tool_calls_of_the_real_model_are_logged_and_score_zero(sample_build, small_service, llm_server, tmp_path):
    """Two real ways the 270M model fails: arguments cut by max_tokens (invalid JSON), and with
    tool_choice auto, prose instead of a tool call (its chat format does not render tools)."""
    config = sample_build[0]
    client = _local_client(llm_server, tmp_path)
    iids = list(small_service.instances.instances)[:2]
    cut = config.inspire.agent.model_copy(update=dict(
        model="gemma-local", tool_choice="scripted", tool_results_role="user", scripted_searches=5, max_turns=5,
        max_malformed=1, max_tokens=3))
    prose = cut.model_copy(update=dict(tool_choice="auto", max_tokens=40))
    with ServiceThread(create_app(small_service)) as url:
        service = agent.ServiceClient(url)
        records = [agent.agent_episode(service, client, "gemma-local", iids[0], "malformed", cut),
                   agent.agent_episode(service, client, "gemma-local", iids[1], "malformed", prose)]
        service.close()
    for record, kind in zip(records, ("malformed_arguments", "no_tool_call")):
        trajectory = read_trajectory(small_service.trajectories / "malformed" / f"{record.episode_id}.jsonl")
        assert record.status == trajectory.status == "no_submission" and record.malformed_turns == 2
        assert [e["kind"] for e in trajectory.errors] == [kind, kind]
        row = episode_metrics(small_service.instances.get(record.instance_id).gains, trajectory)
        assert row["ndcg"] == row["recall"] == row["g_selected"] == 0 and row["malformed_calls"] == 2


def test_the_commands_build_run_and_score(sample_build, tmp_path, capsys):
    """ratio-spark inspire build / run / score as a user types them (BM25, in-process service)."""
    from ratio_spark.cli.main import main

    _, _, _, root = sample_build
    common = ["--set", f"tables.root={root / 'tables'}", "--set", f"inspire.root={tmp_path / 'instances'}",
              "--set", "inspire.targets.start=2018-01-01", "--set", "inspire.targets.end=2018-12-31"]
    # --summary-json into a folder that does not exist yet: made, like every command's summary file
    assert main(["inspire", "build", *common, "--summary-json", str(tmp_path / "summaries" / "build.json")]) == 0
    built = json.loads((tmp_path / "summaries" / "build.json").read_text())
    assert built["instances"] == len(json.loads((tmp_path / "instances" / "v1" / "manifest.json").read_text())["splits"]["eval"])
    assert main(["inspire", "run", *common, "--policy", "one-shot", "--backend", "bm25", "--run-id", "bm25",
                 "--out", str(tmp_path / "runs")]) == 0
    run = json.loads((tmp_path / "runs" / "bm25.run.json").read_text())
    assert len(run["episodes"]) == built["instances"] and run["policy"] == "one-shot"
    assert main(["inspire", "score", *common, "--runs", str(tmp_path / "runs"), "--run", "bm25",
                 "--out", str(tmp_path / "scores"), "--summary-json", str(tmp_path / "summaries" / "s" / "score.json")]) == 0
    assert "| bm25 |" in capsys.readouterr().out
    assert "bm25" in json.dumps(json.loads((tmp_path / "summaries" / "s" / "score.json").read_text()))
    assert main(["inspire", "score", *common, "--runs", str(tmp_path / "runs"), "--run", "nope", "--out", str(tmp_path)]) == 2
    assert main(["inspire", "run", *common, "--policy", "agent", "--run-id", "x", "--out", str(tmp_path / "runs")]) == 2


@pytest.mark.llm
@pytest.mark.slow
def test_llm_grader_and_llm_briefs_through_the_client_with_fallbacks_and_a_free_rerun(sample_build, llm_server, tmp_path):
    config, manifest, _, root = sample_build
    first = json.loads((root / "instances" / "v1" / manifest["instances"][manifest["splits"]["eval"][0]]["file"]).read_text())
    day = dt.date.fromisoformat(first["evaluator"]["target"]["pub_date"])
    config = config.model_copy(deep=True)
    config.inspire.root = str(tmp_path / "instances")
    config.inspire.targets.start, config.inspire.targets.end = day, day  # a date with an instance under the rule
    config.inspire.targets.max_targets = 3
    config.inspire.grading = config.inspire.grading.model_copy(update=dict(grader="llm", model="gemma-local", max_tokens=80))
    config.inspire.brief = config.inspire.brief.model_copy(update=dict(mode="llm", model="gemma-local", max_tokens=120))
    client = _local_client(llm_server, tmp_path)
    manifest = build_instances(config.inspire, config.tables.location, client, log=lambda *_: None)
    counts = manifest["counts"]
    usage = client.usage()["gemma-local"]
    kept = counts.get("instances", 0) + counts.get("dropped_no_brief", 0)  # the targets that got a brief request
    assert usage["requests"] == counts["antecedent_candidates"] + kept and counts["antecedent_candidates"] > 0
    for iid in manifest["splits"]["eval"]:
        data = json.loads((tmp_path / "instances" / "v1" / "instances" / f"{iid}.json").read_text())
        assert data["evaluator"]["brief"]["source"] in ("llm:gemma-local", "extractive_fallback")
        assert all(a["grader"] in ("llm:gemma-local", "rule_fallback") for a in data["evaluator"]["antecedents"])
    assert manifest["models"] == {"grader": {"endpoint": "gemma-local", "model": "gemma-3-270m"},
                                  "brief": {"endpoint": "gemma-local", "model": "gemma-3-270m"}}
    # Every valid answer is cached: a rebuild asks only what failed before, and gives the same instances.
    again = _local_client(llm_server, tmp_path)
    rebuilt = build_instances(config.inspire, config.tables.location, again, log=lambda *_: None)
    second = again.usage()["gemma-local"]
    failed = counts.get("llm_grades_failed_rule_used", 0) + counts.get("llm_briefs_failed_extractive_used", 0)
    assert second["cached"] >= second["requests"] - failed
    if not failed:
        assert second["cached"] == second["requests"] and second["http_calls"] == 0
        assert {i: e["sha256"] for i, e in rebuilt["instances"].items()} == {i: e["sha256"] for i, e in manifest["instances"].items()}
