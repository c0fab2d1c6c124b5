"""The results notebook runs against a results folder that `ratio-spark evaluate` wrote (BM25 on the fixture)."""

from __future__ import annotations

import pytest

from conftest import REPO_ROOT, execute_notebook, notebook_outputs, tagged_cell


@pytest.mark.slow
def test_the_results_notebook_shows_tables_plots_and_a_query_with_its_top_10(eval_tables, tmp_path, monkeypatch):
    from ratio_spark.cli.main import main

    results = tmp_path / "results"
    assert main(["evaluate", "--set", f"tables.root={eval_tables}", "--retrievers", "bm25-1,bm25-3",
                 "--results", str(results), "--no-progress"]) == 0
    notebook = execute_notebook("03_results.ipynb", {
        "RATIO_RESULTS": str(results), "RATIO_TABLES": str(eval_tables), "PYTHONPATH": str(REPO_ROOT)}, monkeypatch)
    assert sum("image/png" in o.get("data", {}) for o in notebook_outputs(notebook)) == 2  # overlap and MRR@10 plots
    headline = tagged_cell(notebook, "headline").outputs[-1]["data"]["text/plain"]
    assert "BM25-unigram" in headline and "BM25-trigram" in headline
    top10 = [o["data"]["text/html"] for o in tagged_cell(notebook, "query-top-10").outputs if "text/html" in o.get("data", {})]
    assert len(top10) == 2 and all(html.count("<tr>") >= 11 for html in top10)  # header + 10 candidates
    assert any("✓" in html for html in top10)  # the chosen query's gold is in some top 10
