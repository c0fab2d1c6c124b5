"""The ``ratio-spark silver`` subcommands that need no LLM: sample, sheet, anaphora, and their errors."""

from __future__ import annotations

import shutil
from collections import Counter

import pandas as pd
import pyarrow as pa

from prerequisites import missing
from ratio_spark.cli.main import main
from ratio_spark.silver.agreement import load_labels
from ratio_spark.silver.table import SILVER_SCHEMA, write_silver

from conftest import REPO_ROOT, SILVER_FIXTURE, read_jsonl

EXAMPLE_LABELS = REPO_ROOT / "data" / "silver-example" / "labels.csv"


def test_sample_command(silver_tables, tmp_path, capsys):
    out = tmp_path / "sample.csv"
    code = main(["silver", "sample", "--set", f"tables.root={silver_tables}", "--set", "silver.sample.specify=10",
                 "--strata", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "equal allocation by marker_entry" in text and "for example" in text
    sample = pd.read_csv(out)
    available = Counter(r["move"] for r in read_jsonl(SILVER_FIXTURE / "queries.jsonl") if r["split"] == "test")
    assert available["specify"] > 10
    assert sample.groupby("move").size().to_dict() == {"address": available["address"], "broaden": available["broaden"],
                                                       "specify": 10}


def test_sheet_command_and_its_labels_roundtrip(silver_tables, tmp_path, capsys):
    code = main(["silver", "sheet", "--set", f"tables.root={silver_tables}", "--per-move", "5",
                 "--moves", "address,broaden", "--annotator", "ann", "--out", str(tmp_path), "--name", "s1",
                 "--exclude-labels", str(EXAMPLE_LABELS)])
    assert code == 0
    sheet = pd.read_csv(tmp_path / "s1.csv", keep_default_na=False)
    labelled = set(load_labels(EXAMPLE_LABELS)["query_id"])
    # 5 Address; Broaden has 3 pairs, all in the example labels, so none is left
    assert sheet.groupby("move").size().to_dict() == {"address": 5}
    assert not labelled & set(sheet["query_id"])
    assert all(sheet["passage"].str.contains(", ")) and set(sheet["annotator"]) == {"ann"}
    page = (tmp_path / "s1.html").read_text()
    assert "Download labels" in page and "Instructions for <b>ADDRESS</b>" in page
    assert all(q in page for q in sheet["query_id"])
    sheet.loc[:2, "label"] = ["accept", "reject", "accept"]  # an annotator fills three rows
    sheet.to_csv(tmp_path / "filled.csv", index=False)
    labels = load_labels(tmp_path / "filled.csv")
    assert len(labels) == 3 and labels["label"].tolist() == [True, False, True]


def test_anaphora_command(tmp_path, capsys):
    rows = []
    for i in range(40):
        anaphoric = i < 30
        rows.append({"split": "test", "query_id": f"q{i}", "move": "address",
                     "marker": "to address this issue" if anaphoric else "to address", "marker_entry": "to address",
                     "pair_id": f"p{i}", "status": "x", "accepted": (i % 4 != 0) if anaphoric else (i % 4 == 0),
                     "verdicts": [], "prompt_ids": [], "judge_model": "m", "judge_model_id": "m",
                     "sample_seed": 0, "sample_stratum": "to address"})
    write_silver(pa.Table.from_pylist(rows, schema=SILVER_SCHEMA), str(tmp_path / "silver"))
    code = main(["silver", "anaphora", "--set", f"tables.root={tmp_path}", "--out", str(tmp_path / "a.csv")])
    assert code == 0
    out = capsys.readouterr().out
    with_anaphor = [r for r in rows if r["marker"] != r["marker_entry"]]  # "to address this issue"
    share = f"{100 * len(with_anaphor) / len(rows):.1f}"
    assert "address" in out and share in out, share
    table = pd.read_csv(tmp_path / "a.csv")
    assert table.loc[0, "with_anaphor"] == len(with_anaphor)
    assert table.loc[0, "accepted_with"] == sum(r["accepted"] for r in with_anaphor)


def test_errors_are_messages_not_tracebacks(tmp_path, capsys):
    assert main(["silver", "sample", "--set", f"tables.root={tmp_path}"]) == 2
    assert "no Delta table" in capsys.readouterr().err
    assert main(["silver", "anaphora", "--set", f"tables.root={tmp_path}"]) == 2
    assert "silver build" in capsys.readouterr().err
    assert main(["silver", "sample", "--set", "silver.sample.vague=1"]) == 2
    assert "unknown move" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("query_id,annotator,label\nq1,a,perhaps\n")
    assert main(["silver", "sheet", "--set", f"tables.root={tmp_path}", "--out", str(tmp_path),
                 "--exclude-labels", str(bad)]) == 2
    assert "perhaps" in capsys.readouterr().err


def test_sheet_html_download_produces_a_labels_csv(silver_tables, tmp_path):
    """Runs the HTML sheet's own script in node with a minimal DOM stub (no browser here)."""
    if shutil.which("node") is None:
        missing("node is not installed: the sheet's JavaScript is not run")
    import re
    import subprocess

    assert main(["silver", "sheet", "--set", f"tables.root={silver_tables}", "--per-move", "2",
                 "--out", str(tmp_path)]) == 0
    script = re.search(r"<script>(.*)</script>", (tmp_path / "sheet.html").read_text(), re.S).group(1)
    (tmp_path / "sheet.js").write_text(script)
    stub = SILVER_FIXTURE / "sheet_dom_stub.js"
    out = subprocess.run(["node", str(stub), str(tmp_path / "sheet.js")], capture_output=True, text=True, check=True)
    (tmp_path / "labels.csv").write_text(out.stdout)
    labels = load_labels(tmp_path / "labels.csv")
    sheet = pd.read_csv(tmp_path / "sheet.csv")
    assert labels["query_id"].tolist() == sheet["query_id"].head(2).tolist()
    assert labels["label"].tolist() == [False, True] and set(labels["annotator"]) == {"ann1"}
    assert pd.read_csv(tmp_path / "labels.csv")["note"].iloc[1] == 'has "quotes", and a comma'
