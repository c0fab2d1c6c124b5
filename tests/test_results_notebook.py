"""The results notebook runs against a results folder that `ratio-spark evaluate` wrote (BM25 on the fixture)."""

from __future__ import annotations

import pytest

REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_results_notebook_shows_tables_plots_and_a_query_with_its_top_10(eval_tables, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    from ratio_spark.cli.main import main

    results = tmp_path / "results"
    assert main(["evaluate", "--set", f"tables.root={eval_tables}", "--retrievers", "bm25-1,bm25-3",
                 "--results", str(results), "--no-progress"]) == 0
    monkeypatch.setenv("RATIO_RESULTS", str(results))
    monkeypatch.setenv("RATIO_TABLES", str(eval_tables))
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    notebook = nbformat.read(REPO_ROOT / "notebooks" / "03_results.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(REPO_ROOT / "notebooks")}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 2  # overlap and MRR@10 plots
    headline = notebook.cells[1].outputs[-1]["data"]["text/plain"]
    assert "BM25-unigram" in headline and "BM25-trigram" in headline
    top10 = [o["data"]["text/html"] for o in notebook.cells[-1].outputs if "text/html" in o.get("data", {})]
    assert len(top10) == 2 and all(html.count("<tr>") >= 11 for html in top10)  # header + 10 candidates
    assert any("✓" in html for html in top10)  # the chosen query's gold is in some top 10
