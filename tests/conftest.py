"""Session-wide fixtures: one real Spark session, one real local LLM server, and one real sample corpus run
through the pipeline once and shared by every test module that needs pipeline tables.

Markers (registered in pyproject.toml) are set here from the fixtures a test uses: ``spark`` for a test that
needs a JVM (the ``spark`` fixture, directly or through another fixture), ``llm`` for one that needs the local
llama.cpp server. ``pytest -m "not spark and not llm"`` runs the plain-Python tests alone.
"""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from prerequisites import missing
from ratio_spark.config import Config, load_config
from ratio_spark.core.provenance import shared_folder

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = shared_folder(REPO_ROOT)
SAMPLE_TEI = REPO_ROOT / "data" / "sample" / "acl-emnlp-tei"

FIXTURE_MARKERS = {"spark": "spark", "standalone_cluster": "spark", "llm_server": "llm"}


def pytest_collection_modifyitems(config, items):
    """Mark each test by the expensive fixtures in its closure (a test marks itself when it starts a JVM or a
    server some other way, e.g. through spark-submit)."""
    for item in items:
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)


@pytest.fixture(scope="session")
def spark():
    from ratio_spark.pipeline.session import build_spark_session

    # With the Spark NLP jars: the tests run both segment engines (segment.engine: rules, sparknlp) in it.
    session = build_spark_session(load_config(None, ["spark.conf.spark.sql.shuffle.partitions=4"]).spark, spark_nlp=True)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory):
    """A Spark standalone master and two workers (1 core, 1.5 GB each) on 127.0.0.1, started from the installed
    pyspark once they are first needed, both registered; stopped at the end with everything they started."""
    from ratio_spark.pipeline.standalone import StandaloneCluster

    cluster = StandaloneCluster(workers=2, cores=1, memory="1536m", root=tmp_path_factory.mktemp("standalone"))
    with cluster:
        yield cluster


@pytest.fixture(scope="session")
def llm_server():
    """A real llama.cpp server with gemma 3 270M on 127.0.0.1 (ratio_spark.llm.local_server)."""
    from ratio_spark.llm.local_server import LocalLlamaServer, llama_cpp_available

    if not llama_cpp_available():
        missing("llama-cpp-python is not installed (scripts/setup.sh builds the wheel once and installs it)")
    server = LocalLlamaServer()
    server.start()
    yield server
    server.stop()


# --- the shared sample: real GROBID TEI papers of 2016-2018 plus one file per failure ingest must survive ---


@dataclass(frozen=True)
class SampleCorpus:
    folder: Path
    real_papers: tuple[Path, ...]  # the copied real papers, each one paper of the sample
    expected_rejects: dict[str, int]  # reason -> count, one per planted failure

    @property
    def input_records(self) -> int:
        return len(self.real_papers) + sum(self.expected_rejects.values())


def make_sample_corpus(root: Path, per_year: int) -> SampleCorpus:
    """``per_year`` real papers of each of 2016, 2017 and 2018 (so that train, validation and test all get
    some under conf/sample.yaml), plus one file per failure the ingest stage must turn into a reject."""
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    by_year = [sorted(p for p in SAMPLE_TEI.glob(f"D1{y}-*.gz") if "000.tei" not in p.name) for y in (6, 7, 8)]
    real = [p for papers in zip(*by_year) for p in papers][: 3 * per_year]
    for path in real:
        shutil.copy(path, corpus / path.name)
    text = gzip.decompress(real[0].read_bytes())
    cut = text.index(b"<", len(text) // 2)
    (corpus / "P17-9001.tei.xml").write_bytes(text[:cut])  # truncated: malformed XML
    (corpus / "P17-9002.tei.xml").write_bytes(b"\xff\xfe\x00<TEI>" + b"\x80" * 20)  # not UTF-8
    (corpus / "P17-9003.tei.xml").write_bytes(b"")  # empty file (Spark's readers skip these)
    (corpus / "P17-9004.tei.xml.gz").write_bytes(b"not gzip at all")  # unreadable .gz
    # Same paper id as a real file, in a sub-folder: one of the two is kept, the other rejected.
    (corpus / "dup").mkdir()
    (corpus / "dup" / real[1].name.replace(".gz", "")).write_bytes(gzip.decompress(real[1].read_bytes()))
    # No date anywhere: header date removed and an id that is not an anthology id.
    no_date = text.replace(b"<date", b"<nodate").replace(b"</date>", b"</nodate>")
    (corpus / "paper-without-date.tei.xml").write_bytes(no_date)
    # A TEI file with no body text and no abstract (a failed PDF parse).
    header = text.split(b"<body>")[0]
    header = header.split(b"<abstract")[0] + header.split(b"</abstract>")[1] if b"</abstract>" in header else header
    (corpus / "P17-9005.tei.xml").write_bytes(header + b"<body></body></text></TEI>")
    front = SAMPLE_TEI / "P16-1000.tei.xml.gz"  # ACL front matter: excluded by conf/sample.yaml's path rule
    shutil.copy(front, corpus / front.name)
    expected_rejects = {
        "malformed_xml": 1, "undecodable_bytes": 1, "empty_file": 1, "unreadable_file": 1,
        "duplicate_paper_id": 1, "missing_date": 1, "empty_body": 1, "excluded_by_path_rule": 1,
    }
    return SampleCorpus(corpus, tuple(real), expected_rejects)


def sample_config(corpus: Path, tables_root: Path, release_root: Path) -> Config:
    return load_config(REPO_ROOT / "conf" / "sample.yaml", [
        f"inputs.0.path={corpus}", f"tables.root={tables_root}", f"release.root={release_root}"])


@dataclass
class SampleRun:
    """The shared sample after some stages: its corpus, config and each stage's summary. Read-only: a test
    that writes tables uses its own root (``copy_tables``) or ``tables.overrides``."""

    corpus: SampleCorpus
    config: Config
    summaries: dict[str, dict] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)  # Delta version of each table as the fixtures left it

    @property
    def tables_root(self) -> Path:
        return Path(self.config.tables.root)

    def copy_tables(self, target: Path) -> Config:
        """A private copy of the tables (and release) to write to; returns its config."""
        shutil.copytree(self.tables_root, target / "tables")
        if Path(self.config.release.root).exists():
            shutil.copytree(self.config.release.root, target / "release")
        return sample_config(self.corpus.folder, target / "tables", target / "release")


SAMPLE_PAPERS_PER_YEAR = 12


def _table_versions(root: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    return {p.name: DeltaTable(str(p)).version() for p in sorted(root.iterdir()) if (p / "_delta_log").is_dir()}


# --- tables compared row for row (the end-to-end runs and the update tests: one helper, tests in two folders) ---
def table_names(root: Path) -> list[str]:
    """The folders under ``root`` that hold a Delta table: a committed version in their log. A writer killed
    before a new table's first commit leaves a log folder without one, which is no table to any Delta reader."""
    return sorted(p.name for p in root.iterdir() if any((p / "_delta_log").glob("*.json")))  # 00000000000000000000.json, ...


def table_rows(location: Path) -> list[str]:
    """Every row as text, sorted, duplicates kept."""
    from deltalake import DeltaTable

    frame = DeltaTable(str(location)).to_pandas()
    return sorted(map(str, frame.astype(str).itertuples(index=False)))


def release_manifest(release: Path) -> dict:
    """A release's manifest.json without its ``sha256`` map: the map pins the bytes of each file as written, and a
    Parquet file's bytes or the card's provenance lines (the commit a cluster's zip does not have, the inputs an
    update added) may differ where every row is the same (parquet-mr writes each column chunk's list of encodings
    in an order that changes from one JVM to the next); assert_same_tables compares the rows."""
    import json

    manifest = json.loads((release / "manifest.json").read_text())
    assert set(manifest.pop("sha256")) >= {"README.md"}, "the manifest lists the hashes of the release's files"
    return manifest


def assert_same_tables(root: Path, reference: Path) -> None:
    assert table_names(root) == table_names(reference)
    for name in table_names(reference):
        assert table_rows(root / name) == table_rows(reference / name), name


def _run_stages(spark, run: SampleRun, stages) -> SampleRun:
    from ratio_spark.pipeline.runner import run_stage

    for stage in stages:
        run.summaries[stage] = run_stage(spark, run.config, stage)
    run.versions = _table_versions(run.tables_root)
    return run


def _new_sample_run(root: Path) -> SampleRun:
    corpus = make_sample_corpus(root, SAMPLE_PAPERS_PER_YEAR)
    return SampleRun(corpus, sample_config(corpus.folder, root / "tables", root / "release"))


def _shared_between_workers(tmp_path_factory) -> Path | None:
    """Under pytest-xdist, a folder every worker of this run sees (their temp folders' parent); else None."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return tmp_path_factory.getbasetemp().parent / "shared-sample"


def _sample_run_built_once(spark, root: Path) -> SampleRun:
    """The whole pipeline on the sample, run by the first xdist worker that asks and read by the others: the
    sample's stages are the suite's most expensive fixture, and each worker would otherwise repeat them."""
    import pickle

    from filelock import FileLock

    from ratio_spark.pipeline.stages import PIPELINE

    record = root / "sample-run.pickle"
    with FileLock(f"{root}.lock"):
        if not record.exists():
            root.mkdir(parents=True, exist_ok=True)
            record.write_bytes(pickle.dumps(_run_stages(spark, _new_sample_run(root), PIPELINE)))
    return pickle.loads(record.read_bytes())


def _check_untouched(run: SampleRun) -> None:
    now = _table_versions(run.tables_root)
    written = sorted(name for name, version in now.items() if run.versions.get(name) != version)
    assert not written, f"a test wrote to the shared sample tables {written}: write to SampleRun.copy_tables instead"


@pytest.fixture(scope="session")
def sample_segmented(spark, tmp_path_factory):
    """The shared sample ingested and segmented once for the whole session (``papers``, ``rejects``,
    ``sentences``; under xdist the whole pipeline, built once for all workers). Fails at teardown when a test
    wrote to one of its tables."""
    shared = _shared_between_workers(tmp_path_factory)
    if shared:
        run = _sample_run_built_once(spark, shared)
    else:
        run = _run_stages(spark, _new_sample_run(tmp_path_factory.mktemp("sample")), ("ingest", "segment"))
    yield run
    _check_untouched(run)


@pytest.fixture(scope="session")
def sample_benchmark(spark, sample_segmented):
    """The shared sample through the rest of the pipeline once: citations, mine, pools (leakage-checked), export."""
    from ratio_spark.pipeline.stages import PIPELINE

    run = sample_segmented
    return _run_stages(spark, run, [stage for stage in PIPELINE if stage not in run.summaries])


# --- notebooks -------------------------------------------------------------------------------------------


def execute_notebook(name: str, env: dict[str, str], monkeypatch):
    """Run notebooks/<name> with ``env`` set; return the executed notebook, failing on any error output."""
    import nbformat
    from nbclient import NotebookClient

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    notebook = nbformat.read(REPO_ROOT / "notebooks" / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(REPO_ROOT / "notebooks")}}).execute()
    errors = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors[0].get("evalue")
    return notebook


def notebook_outputs(notebook) -> list:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def tagged_cell(notebook, tag: str):
    """The one cell carrying ``tag`` in its metadata (tests find cells by tag, never by position)."""
    cells = [cell for cell in notebook.cells if tag in cell.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{len(cells)} cells tagged {tag!r}"
    return cells[0]


# --- evaluation (issue 5): a small slice of the sample's real queries and pools as Delta tables, no Spark ---
EVAL_FIXTURE = FIXTURES / "eval"


def read_jsonl(path: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_eval_tables(root: Path, fixture: Path = EVAL_FIXTURE) -> Path:
    """Write <fixture>/{queries,candidates}.jsonl (default tests/fixtures/eval) as Delta tables partitioned by
    split."""
    import pyarrow as pa
    from deltalake import write_deltalake

    for name in ("queries", "candidates"):
        write_deltalake(str(root / name), pa.Table.from_pylist(read_jsonl(fixture / f"{name}.jsonl")),
                        partition_by=["split"], mode="overwrite")
    return root


@pytest.fixture(scope="session")
def eval_tables(tmp_path_factory) -> Path:
    """A tables root with `queries` and `candidates` of the test and validation splits (tests/fixtures/eval)."""
    return write_eval_tables(tmp_path_factory.mktemp("eval-tables"))


@pytest.fixture(scope="session")
def training_tables(tmp_path_factory) -> Path:
    """A tables root with `queries` and `candidates` of the train, validation and test splits of a slice of the
    sample (tests/fixtures/training; the training tests)."""
    return write_eval_tables(tmp_path_factory.mktemp("training-tables"), FIXTURES / "training")


SILVER_FIXTURE = FIXTURES / "silver"


@pytest.fixture(scope="session")
def silver_tables(tmp_path_factory):
    """Delta ``queries`` and ``candidates`` with real test pairs of the sample (tests/fixtures/silver),
    written with deltalake (no Spark). Returns the tables root."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    root = tmp_path_factory.mktemp("silver-tables")
    for name in ("queries", "candidates"):
        rows = read_jsonl(SILVER_FIXTURE / f"{name}.jsonl")
        for row in rows:
            row["pub_date"] = dt.date.fromisoformat(row["pub_date"]) if row.get("pub_date") else None
        write_deltalake(str(root / name), pa.Table.from_pylist(rows), partition_by=["split"])
    return root


# --- human evaluation (issue 17): real sample queries, a pool with their golds, two real BM25 runs ---
@pytest.fixture(scope="session")
def humaneval_runs(tmp_path_factory) -> dict:
    """Delta ``queries`` (the 72 test queries of tests/fixtures/silver, with markers) and ``candidates`` (the
    test pools of tests/fixtures/eval and /silver, 407 sentences), and the BM25-unigram and BM25-bigram runs
    that ``ratio-spark evaluate`` writes for them. Returns {"tables": root, "runs": {name: run folder}}."""
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    from ratio_spark.cli.main import main

    root = tmp_path_factory.mktemp("humaneval")

    def rows(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    queries = [r for r in rows(FIXTURES / "silver" / "queries.jsonl") if r["split"] == "test"]
    pool: dict[str, dict] = {}
    for row in rows(EVAL_FIXTURE / "candidates.jsonl") + rows(FIXTURES / "silver" / "candidates.jsonl"):
        if row["split"] == "test":
            pool.setdefault(row["candidate_id"], row)
    for name, data in (("queries", queries), ("candidates", list(pool.values()))):
        write_deltalake(str(root / "tables" / name), pa.Table.from_pylist(data), partition_by=["split"])
    results = root / "results"
    code = main(["evaluate", "--set", f"tables.root={root / 'tables'}", "--split", "test", "--retrievers",
                 "bm25-1,bm25-2", "--analyses", "none", "--results", str(results), "--no-progress"])
    assert code == 0
    return {"tables": root / "tables", "runs": {"unigram": results / "runs" / "bm25-1", "bigram": results / "runs" / "bm25-2"}}


# --- the real headless Chromium (Playwright through executable_path): the human-evaluation app and the browser ---
CHROMIUM = os.environ.get("RATIO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        missing(f"no Chromium at {CHROMIUM} (scripts/setup-browser.sh installs Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (dev extra)")
    with sync_playwright() as playwright:
        # launch() gives every browser a fresh temporary profile (--user-data-dir), removed on close
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()
