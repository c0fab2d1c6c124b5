"""The annotation app, served by ``ratio-spark humaneval serve`` on 127.0.0.1 and a free port, driven in a real
headless browser (Playwright for Python with Debian's Chromium): mouse and keyboard labelling, reload, resume,
finish; tokens (401, 403, admin); a server killed with SIGKILL mid-study loses no saved label."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ratio_spark.cli.main import main

pytestmark = pytest.mark.slow  # a server subprocess and a browser

# System names that never occur in the sample's sentences: the page must not show them (blind A/B).
SYSTEMS = ("zyxunigram", "qwvbigram")


class Server:
    """``ratio-spark humaneval serve --port 0`` in a subprocess; its output is kept to check what it logs."""

    def __init__(self, study: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ratio_spark.cli.main", "humaneval", "serve", "--study", str(study), "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        ready = threading.Event()

        def drain():
            for line in self.process.stdout:
                self.lines.append(line)
                if line.startswith("serving "):
                    self.url = line.split(" at ")[1].strip().rstrip("/")
                    ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(120):
            self.process.kill()
            raise AssertionError("the server did not start:\n" + "".join(self.lines))

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(30)


def request(url: str, *, token: str | None = None, body: dict | None = None) -> tuple[int, dict | str]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


@pytest.fixture(scope="module")
def study(humaneval_runs, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("app") / "study.sqlite"
    runs = humaneval_runs["runs"]
    code = main(["humaneval", "assign", "--set", f"tables.root={humaneval_runs['tables']}",
                 "--system", f"{SYSTEMS[0]}={runs['unigram']}", "--system", f"{SYSTEMS[1]}={runs['bigram']}",
                 "--annotators", "alice,bob", "--per-move", "2", "--overlap", "0.5", "--out", str(out)])
    assert code == 0
    lines = out.with_suffix(".links.tsv").read_text().splitlines()[1:]
    tokens = {name: path.removeprefix("/t/") for name, path in (line.split("\t") for line in lines)}
    return {"path": out, "tokens": tokens}


def db(study: dict, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(study["path"]) as conn:
        return conn.execute(sql, args).fetchall()


def assignment_ids(study: dict, annotator: str) -> list[int]:
    return [r[0] for r in db(study, "SELECT assignment_id FROM assignments WHERE annotator = ? ORDER BY position", annotator)]


@pytest.fixture(scope="module")
def server(study):
    running = Server(study["path"])
    yield running
    running.stop()


def wait_saved(page) -> None:
    page.locator('#study[data-pending="0"]').wait_for(timeout=30_000)
    assert page.locator("#study").get_attribute("data-failed") is None, page.inner_text("#save-status")


def expected_after(keys_by_item: list[tuple[str, str]]) -> dict[str, bool]:
    """The label each candidate ends with: the last answer given to any of its places in the two lists."""
    final: dict[str, bool] = {}
    for cid, value in keys_by_item:
        final[cid] = value == "useful"
    return final


def label_all_by_keyboard(page, pattern: str) -> list[tuple[str, str]]:
    """Press u/n once per place in the lists, from the first; returns (candidate, value) in order."""
    cids = page.locator(".candidate").evaluate_all("items => items.map(li => li.dataset.cid)")
    given = []
    for i, cid in enumerate(cids):
        value = "useful" if pattern[i % len(pattern)] == "u" else "not-useful"
        page.keyboard.press("u" if value == "useful" else "n")
        given.append((cid, value))
    return given


def test_annotator_labels_with_mouse_and_keyboard_reloads_and_finishes(study, server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server.url}/t/{study['tokens']['alice']}")
    mine = assignment_ids(study, "alice")
    assert page.url == f"{server.url}/assignments/{mine[0]}"
    assert page.inner_text("h1") == f"Query 1 of {len(mine)}"
    body = page.inner_text("body")
    assert not any(name in body or name in page.content() for name in SYSTEMS)  # blind to the systems
    query_text = db(study, "SELECT q.query_text FROM assignments a JOIN queries q USING (query_id) "
                           "WHERE assignment_id = ?", mine[0])[0][0]
    assert page.inner_text("#query-text") == query_text

    # mouse: A1 useful, A2 not useful (clicking the label text)
    cids = page.locator(".candidate").evaluate_all("items => items.map(li => li.dataset.cid)")
    page.locator("#cand-A-1").get_by_text("Useful", exact=True).click()
    page.locator("#cand-A-2").get_by_text("Not useful", exact=True).click()
    given = [(cids[0], "useful"), (cids[1], "not-useful")]
    # keyboard: j moves on to A3, then u / n for every other place; b prefers List B; c writes a comment
    page.keyboard.press("j")
    for i, cid in enumerate(cids[2:]):
        value = "useful" if i % 3 == 0 else "not-useful"
        page.keyboard.press("u" if value == "useful" else "n")
        given.append((cid, value))
    page.keyboard.press("b")
    page.keyboard.press("c")
    page.keyboard.type("List B stays closer to the problem.")
    page.keyboard.press("Escape")
    wait_saved(page)
    expected = expected_after(given)
    assert page.locator("#complete-badge").is_visible()

    stored = dict(db(study, "SELECT candidate_id, useful FROM labels WHERE assignment_id = ?", mine[0]))
    assert stored == {c: int(v) for c, v in expected.items()}
    assert db(study, "SELECT preference, comment, completed_at IS NOT NULL FROM assignments WHERE assignment_id = ?",
              mine[0]) == [("B", "List B stays closer to the problem.", 1)]

    page.reload()
    shown = page.locator(".candidate").evaluate_all(
        "items => items.map(li => [li.dataset.cid, li.querySelector('input:checked').value])")
    assert {cid: value == "useful" for cid, value in shown} == expected  # both places of a shared candidate agree
    assert len(shown) == len(cids)
    assert page.locator('input[name="preference"][value="B"]').is_checked()
    assert page.input_value("#comment") == "List B stays closer to the problem."
    # resume: the start page goes to the first query not complete; then finish the rest by keyboard only
    page.goto(server.url + "/")
    assert page.url == f"{server.url}/assignments/{mine[1]}"
    for position, assignment_id in enumerate(mine[1:], start=2):
        assert page.inner_text("h1") == f"Query {position} of {len(mine)}"
        label_all_by_keyboard(page, "nnu")
        page.keyboard.press("t")
        wait_saved(page)
        with page.expect_navigation():
            page.keyboard.press("]")
    assert page.url == f"{server.url}/done"
    assert "All done" in page.inner_text("h1")
    assert db(study, "SELECT COUNT(*), SUM(completed_at IS NOT NULL) FROM assignments WHERE annotator = 'alice'") == [
        (len(mine), len(mine))]
    # a query counts as complete only with every distinct candidate labelled and a preference
    assert db(study, "SELECT COUNT(*) FROM assignments a WHERE annotator = 'alice' AND (preference IS NULL OR "
                     "(SELECT COUNT(*) FROM labels l WHERE l.assignment_id = a.assignment_id) <> "
                     "(SELECT COUNT(DISTINCT candidate_id) FROM lists WHERE query_id = a.query_id))") == [(0,)]

    # the screenshot of docs/human-eval.md: the labelled query whose two lists differ most
    distinct = {aid: db(study, "SELECT COUNT(DISTINCT candidate_id) FROM lists JOIN assignments USING (query_id) "
                               "WHERE assignment_id = ?", aid)[0][0] for aid in mine}
    page.goto(f"{server.url}/assignments/{max(mine, key=lambda aid: (distinct[aid], -aid))}")
    page.evaluate("() => window.scrollTo(0, 0)")
    screenshots = Path(os.environ.get("RATIO_SCREENSHOT_DIR", tmp_path))
    screenshots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshots / "human-eval-annotation.png"))
    assert (screenshots / "human-eval-annotation.png").stat().st_size > 10_000
    page.close()


def test_tokens_guard_every_assignment(study, server, browser):
    alice, bob = assignment_ids(study, "alice")[0], assignment_ids(study, "bob")[0]
    tokens = study["tokens"]
    before = db(study, "SELECT * FROM labels ORDER BY assignment_id, candidate_id")
    candidate = db(study, "SELECT candidate_id FROM lists JOIN assignments USING (query_id) WHERE assignment_id = ?", alice)[0][0]
    url = f"{server.url}/api/assignments/{alice}"

    assert request(url, token=tokens["bob"])[0] == 403
    assert request(url + "/labels", token=tokens["bob"], body={"candidate_id": candidate, "useful": False})[0] == 403
    assert request(url + "/preference", token=tokens["bob"], body={"preference": "tie"})[0] == 403
    assert request(url, token="wrong-" + tokens["alice"])[0] == 401
    assert request(url)[0] == 401
    assert request(f"{server.url}/assignments/{alice}", token=tokens["bob"])[0] == 403
    assert request(f"{server.url}/t/not-a-token")[0] == 401
    assert request(url, token=tokens["admin"])[0] == 403
    assert db(study, "SELECT * FROM labels ORDER BY assignment_id, candidate_id") == before

    status, own = request(f"{server.url}/api/assignments/{bob}", token=tokens["bob"])
    assert status == 200 and own["required"] >= 10
    assert request(f"{server.url}/api/assignments/{bob}/labels", token=tokens["bob"],
                   body={"candidate_id": "c-not-in-the-lists", "useful": True})[0] == 422
    status, progress = request(f"{server.url}/api/progress", token=tokens["admin"])
    assert status == 200
    assert {p["annotator"]: p["assigned"] for p in progress} == dict(
        db(study, "SELECT annotator, COUNT(*) FROM assignments GROUP BY annotator"))
    assert request(f"{server.url}/api/progress", token=tokens["bob"])[0] == 403

    # in the browser, with bob's link: alice's page is refused, and the admin page shows progress
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/t/{tokens['bob']}")
    response = page.goto(f"{server.url}/assignments/{alice}")
    assert response.status == 403 and "assigned to someone else" in page.inner_text("body")
    page.goto(f"{server.url}/t/{tokens['admin']}")
    assert page.url == f"{server.url}/admin" and "alice" in page.inner_text("#progress")
    context.close()

    logged = "".join(server.lines)
    assert "/t/{token}" in logged and "GET /api/assignments/{assignment_id} 403" in logged
    assert not any(token in logged for token in tokens.values())  # tokens are never logged


def test_a_killed_server_loses_no_saved_label(study, browser):
    bob = assignment_ids(study, "bob")
    first = Server(study["path"])
    page = browser.new_page()
    page.goto(f"{first.url}/t/{study['tokens']['bob']}")
    assert page.url == f"{first.url}/assignments/{bob[0]}"
    given = label_all_by_keyboard(page, "un")  # every candidate, no preference yet: the query is not complete
    wait_saved(page)
    saved = dict(db(study, "SELECT candidate_id, useful FROM labels WHERE assignment_id = ?", bob[0]))
    assert saved == {c: int(v) for c, v in expected_after(given).items()}

    first.stop(signal.SIGKILL)  # no shutdown, no checkpoint: what was acknowledged must be on disk
    assert first.process.returncode == -signal.SIGKILL
    assert dict(db(study, "SELECT candidate_id, useful FROM labels WHERE assignment_id = ?", bob[0])) == saved

    second = Server(study["path"])
    try:
        page.goto(f"{second.url}/t/{study['tokens']['bob']}")
        assert page.url == f"{second.url}/assignments/{bob[0]}"  # resumes on the unfinished query
        shown = page.locator(".candidate").evaluate_all(
            "items => items.map(li => [li.dataset.cid, (li.querySelector('input:checked') || {}).value])")
        assert {cid: int(value == "useful") for cid, value in shown} == saved
        page.keyboard.press("a")
        wait_saved(page)
        assert db(study, "SELECT completed_at IS NOT NULL FROM assignments WHERE assignment_id = ?", bob[0]) == [(1,)]
    finally:
        page.close()
        second.stop()
