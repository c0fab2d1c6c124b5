"""Stage declarations, drops and reconciliation: the runner refuses what a stage does not declare, and a
stage that loses a row without a drop fails loudly.

The mine fixture is a handful of hand-written consecutive sentence pairs; each row states the outcome
it is there for, and the expected counts are derived from those rows.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from conftest import REPO_ROOT
from ratio_spark.config import load_config
from ratio_spark.core.errors import ContractError, MissingTableError, ReconciliationError
from ratio_spark.core.schema import REASONS, TABLES, Reason, reasons_of
from ratio_spark.core.text import normalize_text
from ratio_spark.pipeline.stage import Balance, Outcome, Stage, reconcile
from ratio_spark.pipeline.stages import PIPELINE, STAGES, table_catalogue, writers_of

# --- declarations (no Spark) ------------------------------------------------------------------------


def test_the_committed_table_catalogue_is_generated_from_the_declarations():
    committed = (REPO_ROOT / "docs" / "tables.md").read_text(encoding="utf-8")
    assert committed == table_catalogue(), (
        "docs/tables.md is out of date: python -m ratio_spark.pipeline.stages > docs/tables.md"
    )


def test_every_reason_is_one_declared_code_of_a_stage():
    declared = {name: value for name, value in vars(Reason).items() if name.isupper()}
    assert set(declared.values()) == set(REASONS)  # nothing registered outside the class, nothing twice
    for name, code in declared.items():
        assert name == code.upper() and re.fullmatch(r"[a-z]+(_[a-z]+)*", code), name
        assert REASONS[code].stage in PIPELINE and REASONS[code].meaning
    for stage in STAGES.values():
        if stage.drops_table is None:
            assert stage.drop_reasons == (), stage.name


def test_stages_read_only_declared_columns_of_tables_an_earlier_stage_writes():
    config = load_config(None, [])
    for position, stage in enumerate(STAGES.values()):
        for table, columns in stage.reads.items():
            assert set(columns) <= set(TABLES[table].column_names), (stage.name, table)
            assert PIPELINE.index(writers_of(table)[0]) < position, (stage.name, table)
        assert all(name in TABLES for name in stage.writes)
        assert type(stage).process is not Stage.process, stage.name
        # its settings section and file inputs are settings of the configuration
        for key in filter(None, (stage.settings, *stage.files.values())):
            assert stage.setting(config, key) is not None, (stage.name, key)


def test_reconcile_balances_and_names_the_numbers_when_it_does_not():
    assert reconcile("mine", "pairs", 10, {"mined_pairs": 7}, {"short_gold": 3}) == "10 pairs = 7 mined_pairs + 3 dropped"
    with pytest.raises(ReconciliationError) as failure:
        reconcile("mine", "pairs", 10, {"mined_pairs": 6}, {"short_gold": 3})
    message = str(failure.value)
    assert message.startswith("mine:") and "10 pairs" in message and "6 mined_pairs" in message
    assert "short_gold 3" in message and "-1 unexplained" not in message and "+1 unexplained" in message


def test_side_by_side_returns_each_result_and_raises_the_first_failure_after_all_finished():
    import threading
    import time

    from ratio_spark.pipeline.runner import side_by_side

    both_running = threading.Barrier(2, timeout=10)  # broken (an error) unless the two tasks run at the same time

    def meet(result):
        both_running.wait()
        return result

    assert side_by_side({"a": lambda: meet(1), "b": lambda: meet(2)}) == {"a": 1, "b": 2}

    finished = []

    def slow():
        time.sleep(0.3)
        finished.append("slow")

    def fail(message):
        raise ValueError(message)

    with pytest.raises(ValueError, match="first"):
        side_by_side({"slow": slow, "first": lambda: fail("first"), "second": lambda: fail("second")})
    assert finished == ["slow"]  # the failures did not abandon a running task


def test_the_stage_commands_take_their_help_from_the_stages():
    # tests/project/test_layout.py imports ratio_spark.cli and the stages with pyspark blocked.
    from ratio_spark.cli.main import build_parser

    help_text = " ".join(build_parser().format_help().split())
    assert all(STAGES[name].help[:40] in help_text for name in PIPELINE)


def test_every_stage_has_its_job_and_nothing_else_does():
    """``jobs/<stage>.py`` (spark-submit) for each registered stage, plus ``run.py`` and the lexicon tools."""
    jobs = {p.stem for p in (REPO_ROOT / "jobs").glob("*.py")}
    assert set(PIPELINE) <= jobs
    for name in PIPELINE:
        assert f'main(["{name}", *sys.argv[1:]])' in (REPO_ROOT / "jobs" / f"{name}.py").read_text(encoding="utf-8")


def test_a_balance_with_no_drops_of_its_own_takes_the_stage_s():
    balance = Balance("papers", 5, {"papers_with_sentences": 4})
    assert balance.check("segment", {"no_paragraphs": 1}) == "5 papers = 4 papers_with_sentences + 1 dropped"
    with pytest.raises(ReconciliationError, match=r"^segment \(part\): 5 papers came in"):
        Balance("papers", 5, {"papers_with_sentences": 4}, {}, "part").check("segment", {"no_paragraphs": 1})


# --- the runner on a real Spark session -----------------------------------------------------------

PROBLEM = "Neural machine translation struggles with rare and unknown words in many languages."
EXAMPLE = "For example, byte pair encoding splits rare words into frequent subword units."
# (paper, first sentence, its norm_flag, second sentence, the outcome the pair is there for)
PAIRS = [
    ("P17-1001", PROBLEM, None, EXAMPLE, "kept_or_duplicate"),
    ("P17-1002", PROBLEM, None, EXAMPLE, "kept_or_duplicate"),  # the same texts: one of the two is a duplicate
    ("P17-1003", "Character models are slow to train on long documents of any language.", None,
     "For example, it fails.", Reason.SHORT_GOLD),
    ("P17-1004", "%%% 12 34 $$ 56 ## 78 && 90 ** 11 !! 22 ?? 33 @@ 44 ^^ 55 ((", Reason.MALFORMED_FEW_LETTERS,
     "For example, the sentence before this one is mostly numbers and symbols.", Reason.MALFORMED_SENTENCE),
    ("P17-1005", "We evaluate on three benchmarks that cover news, legal and medical text.", None,
     "The results are in Table 2 and they are consistent across all domains.", "no_marker"),
]


def sentence_rows() -> list[dict]:
    rows = []
    for paper_id, first, flag, second, _ in PAIRS:
        for idx, (text, norm_flag) in enumerate(((first, flag), (second, None))):
            rows.append({
                "sentence_id": f"{paper_id}:0:0:{idx}", "paper_id": paper_id, "pub_date": None, "section_idx": 0,
                "section_heading": None, "para_idx": 0, "sent_idx": idx, "char_start": 0, "char_end": len(text),
                "text": text, "norm_text": normalize_text(text), "norm_flag": norm_flag,
            })
    return rows


def pair_id(paper_id: str) -> str:
    return "p" + hashlib.sha256(f"{paper_id}:0:0:0|{paper_id}:0:0:1".encode()).hexdigest()[:16]


def expected_outcomes() -> dict[str, str | None]:
    """pair_id -> drop reason (None: the mined_pairs row), from the fixture's stated outcomes."""
    twins = sorted(pair_id(p) for p, *_, outcome in PAIRS if outcome == "kept_or_duplicate")
    out = {twins[0]: None, **{t: Reason.DUPLICATE_PAIR for t in twins[1:]}}
    out.update({pair_id(p): outcome for p, *_, outcome in PAIRS if outcome in REASONS})
    return out


@pytest.fixture
def tables(spark, tmp_path):
    """A config on an empty tables root, and a function that writes a table there."""
    config = load_config(None, [f"tables.root={tmp_path / 'tables'}"])

    def write(name: str, rows: list[dict], ddl: str | None = None) -> None:
        frame = spark.createDataFrame(rows, ddl or TABLES[name].ddl)
        frame.write.format("delta").mode("overwrite").save(config.tables.location(name))

    return config, write


@pytest.mark.spark
def test_a_missing_input_table_names_the_stage_to_run_first(spark, tables):
    from ratio_spark.pipeline.runner import run_stage

    config, _ = tables
    with pytest.raises(MissingTableError) as failure:
        run_stage(spark, config, "mine")
    message = str(failure.value)
    assert "\n" not in message and "'sentences'" in message and "run `ratio-spark segment` first" in message
    assert config.tables.location("sentences") in message


@pytest.mark.spark
def test_an_input_table_without_a_read_column_is_refused_before_the_stage_starts(spark, tables):
    from ratio_spark.pipeline.runner import run_stage

    config, write = tables
    columns = [c for c in TABLES["sentences"].columns if c.name != "norm_flag"]
    write("sentences", [{c.name: r[c.name] for c in columns} for r in sentence_rows()],
          ", ".join(f"{c.name} {c.type}" for c in columns))
    with pytest.raises(MissingTableError, match=r"lacks column\(s\) \['norm_flag'\]: rerun `ratio-spark segment`"):
        run_stage(spark, config, "mine")


@pytest.mark.spark
def test_mine_writes_every_dropped_pair_with_its_reason_and_reconciles(spark, tables):
    from ratio_spark.pipeline.runner import run_stage

    config, write = tables
    write("sentences", sentence_rows())
    expected = expected_outcomes()
    by_reason = {}
    for reason in expected.values():
        if reason:
            by_reason[reason] = by_reason.get(reason, 0) + 1
    for _ in range(2):  # a rerun replaces the stage's drops instead of adding to them
        summary = run_stage(spark, config, "mine")
        assert summary["pairs_opening_with_a_marker"] == len(expected)
        assert summary["mined_pairs"] == sum(1 for r in expected.values() if r is None)
        assert summary["dropped_by_reason"] == by_reason
        drops = spark.read.format("delta").load(config.tables.location("drops")).filter("stage = 'mine'").collect()
        assert {d["item_id"]: d["reason"] for d in drops} == {p: r for p, r in expected.items() if r}
        assert all(d["item"] == "pair" and d["role"] == "move" and d["text"] for d in drops)
        stats = spark.read.format("delta").load(config.tables.location("stats_drops")).filter("stage = 'mine'")
        assert {r["reason"]: r["rows"] for r in stats.collect()} == by_reason
    mined = spark.read.format("delta").load(config.tables.location("mined_pairs")).collect()
    assert [r["pair_id"] for r in mined] == [p for p, r in expected.items() if r is None]


@pytest.mark.spark
def test_a_stage_that_loses_a_row_without_a_drop_fails_reconciliation(spark, tables, monkeypatch):
    import ratio_spark.pipeline.mine as mine
    from ratio_spark.pipeline.runner import run_stage

    config, write = tables
    write("sentences", sentence_rows())
    honest = mine.mine_pairs

    def lossy(*args, **kwargs):
        result = honest(*args, **kwargs)
        kept = min(p for p, r in expected_outcomes().items() if r is None)
        result.mined = result.mined.filter(result.mined.pair_id != kept)  # gone, and no drop says why
        return result

    monkeypatch.setattr(mine, "mine_pairs", lossy)
    with pytest.raises(ReconciliationError) as failure:
        run_stage(spark, config, "mine")
    n = len(expected_outcomes())
    assert str(failure.value).startswith(f"mine: {n} pairs opening with a marker came in but 0 mined_pairs")
    assert "+1 unexplained" in str(failure.value)


class Toy(Stage):
    """A stage for the runner's tests: writes ``sentences`` from ``papers`` as the test says."""

    name = "segment"  # its reasons are segment's
    help = "toy"
    reads = {"papers": ("paper_id",)}
    writes = ("sentences",)
    settings = "segment"
    files = {"lexicon": "mining.lexicon"}  # the test passes its instruction here

    def process(self, io):
        from pyspark.sql import functions as F

        from ratio_spark.pipeline.tables import drop_rows

        papers = io.read("papers")
        mode = io.file("lexicon")
        frame = io.spark.createDataFrame(sentence_rows()[:1], TABLES["sentences"].ddl)
        if mode == "extra_column":
            frame = frame.withColumn("surprise", F.lit(1))
        if mode == "undeclared_table":
            io.write("mined_pairs", frame)
        if mode == "undeclared_file":
            io.file("prompts")
        if mode != "forget_output":
            io.write("sentences", frame)
        reason = Reason.SHORT_GOLD if mode == "foreign_reason" else Reason.NO_PARAGRAPHS
        io.write_drops(drop_rows(papers.limit(1), reason, "paper_id"))
        n_papers = papers.count()
        if mode == "no_balance":
            return Outcome({"papers": n_papers})
        # the one paper is dropped; "made_up_row" also counts the sentence as a paper that went out
        outputs = {"sentences": 1} if mode == "made_up_row" else {}
        return Outcome({"papers": n_papers}, [Balance("papers", n_papers, outputs)])


TOY = Toy()


@pytest.mark.spark
@pytest.mark.parametrize("mode, error", [
    ("extra_column", r"writes table 'sentences' unlike its declaration: undeclared column\(s\) \['surprise'\]"),
    ("undeclared_table", r"writes table 'mined_pairs', which it does not declare"),
    ("undeclared_file", r"reads the file input 'prompts', which it does not declare"),
    ("no_balance", r"returned no balance"),
    ("forget_output", r"finished without writing its declared table\(s\) \['sentences'\]"),
    ("foreign_reason", r"dropped rows for reason\(s\) \['short_gold'\], which are not its reasons"),
])
def test_the_runner_refuses_what_a_stage_does_not_declare(spark, tables, mode, error):
    from ratio_spark.pipeline.runner import run_stage

    config, write = tables
    write("papers", [{"paper_id": "P17-1001", "title": "A paper"}])
    config = config.model_copy(update={"mining": config.mining.model_copy(update={"lexicon": mode})})
    with pytest.raises(ContractError, match=error):
        run_stage(spark, config, TOY)


@pytest.mark.spark
def test_the_runner_reconciles_the_balances_a_stage_returns(spark, tables):
    from ratio_spark.pipeline.runner import run_stage

    config, write = tables
    write("papers", [{"paper_id": "P17-1001", "title": "A paper"}])
    config = config.model_copy(update={"mining": config.mining.model_copy(update={"lexicon": "made_up_row"})})
    with pytest.raises(ReconciliationError, match=r"^segment: 1 papers came in but 1 sentences \+ 1 dropped"):
        run_stage(spark, config, TOY)


@pytest.mark.spark
def test_the_toy_stage_passes_when_it_keeps_its_contract(spark, tables):
    from ratio_spark.pipeline.runner import run_stage

    config, write = tables
    write("papers", [{"paper_id": "P17-1001", "title": "A paper"}])
    summary = run_stage(spark, config, TOY)
    assert summary["stage"] == "segment" and set(summary["tables"]) == {"sentences", "drops", "stats_drops"}
    assert summary["papers"] == 1 and summary["dropped_by_reason"] == {Reason.NO_PARAGRAPHS: 1}
    assert summary["reconciled"] == ["1 papers = 1 dropped"]


def example_stage_from_the_docs() -> type:
    """The example block of docs/architecture.md ("A stage."), executed as a newcomer would paste it."""
    text = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("<!-- example stage: tests/pipeline/test_contracts.py runs the next block -->", 1)[1]
    code = block.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "docs/architecture.md", "exec"), namespace)
    return namespace["ParagraphSentences"]


@pytest.mark.spark
def test_the_example_stage_of_the_docs_runs_under_the_runner(spark, tables):
    from ratio_spark.pipeline.runner import run_stage

    config, write = tables
    sections = [{"heading": "Intro", "paragraphs": ["One. Two.", "Three."]}, {"heading": None, "paragraphs": ["Four."]}]
    write("papers", [{"paper_id": "P17-1001", "title": "A", "sections": sections},
                     {"paper_id": "P17-1002", "title": "B", "sections": None}])
    stage = example_stage_from_the_docs()()
    summary = run_stage(spark, config, stage)
    assert summary["stage"] == "paragraph_sentences" and summary["sentences"] == 3
    assert summary["reconciled"] == ["3 paragraphs = 3 sentences + 0 dropped"] and summary["dropped_by_reason"] == {}
    rows = spark.read.format("delta").load(config.tables.location("sentences")).orderBy("sentence_id").collect()
    assert [(r["sentence_id"], r["text"]) for r in rows] == [
        ("P17-1001:0:0:0", "One. Two."), ("P17-1001:0:1:0", "Three."), ("P17-1001:1:0:0", "Four.")]


@pytest.mark.spark
def test_segment_drops_papers_that_come_out_without_sentences(spark):
    from ratio_spark.pipeline.segment import papers_without_sentences

    papers = spark.createDataFrame([
        {"paper_id": "has-sentences", "title": "A", "sections": [{"heading": None, "paragraphs": ["Text."]}]},
        {"paper_id": "no-sections", "title": "B", "sections": None},
        {"paper_id": "detector-found-none", "title": "C", "sections": [{"heading": "H", "paragraphs": ["x", "y"]}]},
    ], TABLES["papers"].ddl)
    sentences = spark.createDataFrame([{"paper_id": "has-sentences", "sentence_id": "s"}], TABLES["sentences"].ddl)
    drops = {r["item_id"]: (r["reason"], r["detail"]) for r in papers_without_sentences(papers, sentences).collect()}
    assert drops == {"no-sections": (Reason.NO_PARAGRAPHS, "0 paragraph(s)"),
                     "detector-found-none": (Reason.NO_SENTENCES_DETECTED, "2 paragraph(s)")}
    assert set(reasons_of("segment")) == {Reason.NO_PARAGRAPHS, Reason.NO_SENTENCES_DETECTED}
