"""The benchmark browser (`ratio-spark browse`) on the shared sample's release and two real BM25 runs of it, served on
127.0.0.1 and driven in the real headless Chromium (Playwright through executable_path, as the human-evaluation
app's tests): filter, click through to a query, read its gold and each system's top 10; the plots load; unknown
ids, missing folders and hostile query strings get a 4xx with one line, never a 500."""

from __future__ import annotations

import html
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ratio_spark.cli.main import main
from ratio_spark.evaluation.runs import read_run_files

pytestmark = pytest.mark.slow  # a server subprocess and a browser


@pytest.fixture(scope="module")
def served(sample_benchmark, tmp_path_factory):
    """The release, BM25-unigram and -bigram runs of its test split, and `ratio-spark browse` serving both."""
    release = Path(sample_benchmark.config.release.root)
    results = tmp_path_factory.mktemp("browse") / "results"
    assert main(["evaluate", "--source", str(release), "--split", "test", "--retrievers", "bm25-1,bm25-2",
                 "--analyses", "none", "--no-progress", "--results", str(results)]) == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "ratio_spark.cli.main", "browse", "--release", str(release), "--results", str(results),
         "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines, ready = [], threading.Event()
    address = {}

    def drain():
        for line in process.stdout:
            lines.append(line)
            if line.startswith("serving the benchmark browser at "):
                address["url"] = line.rsplit(" at ", 1)[1].strip().rstrip("/")
                ready.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        assert ready.wait(180), "the browser did not start:\n" + "".join(lines)
        yield {"url": address["url"], "release": release, "results": results, "lines": lines}
    finally:
        process.terminate()
        process.wait(30)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_person_filters_clicks_through_to_a_query_and_reads_its_gold_and_each_top_10(served, browser, tmp_path):
    from ratio_spark.evaluation.data import load_split

    data = load_split(served["release"], "test")
    runs = {name: read_run_files(served["results"] / "runs" / name) for name in ("bm25-1", "bm25-2")}
    # the query to find: a specify query whose gold BM25-unigram ranks in its top 10 (the gold is then marked)
    query = next(q for q in data.queries["specify"] if q.gold_ids[0] in runs["bm25-1"][q.query_id].ids[:10])
    word = max(query.text.split(), key=len)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(served["url"] + "/")
    assert page.inner_text("h1") == "Queries"
    page.select_option("select[name=split]", "test")
    page.select_option("select[name=move]", "specify")
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert page.inner_text("#count").startswith(f"{len(data.queries['specify'])} quer")
    rows = page.locator("#queries tbody tr")
    assert rows.count() == min(50, len(data.queries["specify"]))
    assert set(page.locator("#queries tbody td:nth-child(3)").all_inner_texts()) == {"specify"}
    page.fill("input[name=q]", word)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert query.query_id in page.locator("#queries tbody td:first-child").all_inner_texts()
    assert all(word.casefold() in t.casefold() for t in page.locator("#queries tbody td:nth-child(5)").all_inner_texts())
    with page.expect_navigation():
        page.click(f"a[href='/queries/{query.query_id}']")

    assert page.inner_text("#query-id") == query.query_id
    assert page.inner_text("#query-text") == query.text
    assert page.inner_text("#query-move") == "specify" and page.inner_text("#query-marker") == (query.marker or "–")
    gold_text = data.pool.texts[data.pool.index[query.gold_ids[0]]]
    assert page.inner_text("#gold-text").startswith(gold_text)
    systems = page.locator("section.system")
    assert systems.count() == 2
    for i, name in enumerate(("bm25-1", "bm25-2")):
        section = systems.nth(i)
        ranking = runs[name][query.query_id]
        shown = section.locator("li.candidate").evaluate_all("items => items.map(li => li.dataset.cid)")
        assert shown == ranking.ids[:10]
        assert section.locator(".rank").all_inner_texts() == [str(r) for r in range(1, 11)]
        texts = section.locator("li.candidate .text").all_inner_texts()
        assert texts == [data.pool.texts[data.pool.index[cid]] for cid in ranking.ids[:10]]
        gold_rank = ranking.ids.index(query.gold_ids[0]) + 1 if query.gold_ids[0] in ranking.ids else None
        marked = section.locator("li.candidate.gold").evaluate_all("items => items.map(li => li.dataset.cid)")
        assert marked == ([query.gold_ids[0]] if gold_rank and gold_rank <= 10 else [])
        assert section.locator(".gold-rank").inner_text() == (
            f"gold at rank {gold_rank}" if gold_rank else f"gold not in the top {len(ranking.ids)}")
    assert page.locator("section.system").first.locator("h2").inner_text() == "BM25-unigram"

    # the screenshot of docs/benchmark-tables.md
    screenshots = Path(os.environ.get("RATIO_SCREENSHOT_DIR", tmp_path))
    screenshots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshots / "benchmark-browser.png"))
    assert (screenshots / "benchmark-browser.png").stat().st_size > 10_000

    page.click("nav >> text=Statistics")
    page.wait_for_load_state("load")
    for plot in ("split-sizes", "markers", "yield"):
        assert page.locator(f"#plot-{plot}").evaluate("img => img.complete && img.naturalWidth > 300"), plot
    assert "test" in page.inner_text("#split-sizes")
    page.close()


@pytest.mark.parametrize("path, status, reason", [
    ("/queries/q0000000000000000", 404, "There is no query 'q0000000000000000' in this release."),
    ("/queries/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E", 404, "There is no query '<img src=x onerror=alert(1)>'"),
    ("/queries/%3Cscript%3Ealert(1)%3C%2Fscript%3E", 404, "There is no such page."),
    ("/queries/..%2F..%2Fetc%2Fpasswd", 404, "There is no"),
    ("/?split=dev", 400, "Unknown split 'dev': choose one of"),
    ("/?move=" + urllib.parse.quote("specify' OR 1=1 --"), 400, "Unknown move"),
    ("/?page=0", 400, "Page 0 does not exist"),
    ("/?page=99999", 404, "Page 99999 does not exist"),
    ("/?page=abc", 422, "page: "),
    ("/?q=" + "a" * 201, 400, "at most 200"),
    ("/?q=%00%1b[2J", 400, "control characters"),
    ("/?marker=" + urllib.parse.quote("\x07bell"), 400, "control characters"),
    ("/plots/nope.png", 404, "There is no plot 'nope'."),
    ("/no/such/page", 404, "There is no such page."),
])
def test_a_bad_request_is_a_4xx_with_one_line(served, path, status, reason):
    code, body = get(served["url"] + path)
    assert code == status
    line = body.split('id="reason">', 1)[1].split("</p>", 1)[0]
    assert "\n" not in line and reason in html.unescape(line)
    assert "<script>" not in body and "<img src=x" not in body


def test_hostile_text_is_shown_escaped_and_matches_nothing(served):
    code, body = get(served["url"] + "/?q=" + urllib.parse.quote('<img src=x onerror="alert(1)">'))
    assert code == 200 and "<img src=x" not in body and "&lt;img src=x" in body
    assert '<p id="count">0 queries match' in body
    assert not any("Traceback" in line for line in served["lines"])


def test_missing_folders_and_a_bad_port_end_in_one_line(served, tmp_path, capsys):
    assert main(["browse", "--release", str(tmp_path / "nowhere")]) == 2
    assert main(["browse", "--release", str(served["release"]), "--results", str(tmp_path)]) == 2
    assert main(["browse", "--release", str(served["release"]), "--results", str(tmp_path / "gone")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("ratio-spark browse: error: ") for line in lines)
    assert "no release folder" in lines[0] and "summary.json" in lines[1] and "no results folder" in lines[2]
    with pytest.raises(SystemExit) as usage:
        main(["browse", "--release", str(served["release"]), "--port", "99999"])
    assert usage.value.code == 2 and "'99999' is not a port" in capsys.readouterr().err
