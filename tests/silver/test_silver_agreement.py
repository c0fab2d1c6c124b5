"""Calibration and agreement (Table 9) against values worked out by hand, and the prompt selection."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ratio_spark.silver.agreement import (
    AND_RULE, HUMAN, LabelsError, agreement_table, binary_scores, calibration_annotator, format_table, load_labels,
)

GOLD = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0]  # the calibration annotator on c0..c9
PRED = {
    "p1": [1, 1, 1, 0, 0, 0, 0, 1, 1, 0],  # TP 4, FP 1, FN 1, TN 4
    "p2": [1] * 10,  # accepts everything
    "p3": [1, 1, 0, 0, 0, 0, 0, 0, 1, 0],  # TP 3, FP 0, FN 2, TN 5
}
PANEL = {  # annotator -> labels on n0..n3
    "A": [1, 1, 0, 0],
    "B": [1, 0, 0, 0],
    "C": [1, 1, 1, 0],
}
PANEL_PRED = {"p1": [1, 1, 0, 0], "p2": [1, 1, 1, 1], "p3": [1, 0, 0, 0]}


def test_binary_scores_by_hand():
    s = binary_scores(PRED["p1"], GOLD)
    assert s["precision"] == pytest.approx(0.8) and s["recall"] == pytest.approx(0.8)
    assert s["f1"] == pytest.approx(0.8) and s["agreement"] == pytest.approx(0.8)
    # κ = (p_o - p_e) / (1 - p_e) = (0.8 - 0.5) / 0.5
    assert s["kappa"] == pytest.approx(0.6)
    s = binary_scores(PRED["p2"], GOLD)
    assert s["precision"] == pytest.approx(0.5) and s["recall"] == 1.0 and s["f1"] == pytest.approx(2 / 3)
    assert s["kappa"] == pytest.approx(0.0)
    s = binary_scores(PRED["p3"], GOLD)  # p_e = .3*.5 + .7*.5 = .5, p_o = .8
    assert (s["precision"], s["recall"], s["f1"], s["kappa"]) == pytest.approx((1.0, 0.6, 0.75, 0.6))
    assert math.isnan(binary_scores([1, 1], [1, 1])["kappa"])  # one class everywhere: κ undefined
    assert binary_scores([0, 0], [0, 0])["f1"] == 0.0


def _fixture():
    labels = [{"query_id": f"c{i}", "annotator": "A", "label": bool(g)} for i, g in enumerate(GOLD)]
    labels += [{"query_id": f"n{i}", "annotator": a, "label": bool(v)} for a, vs in PANEL.items() for i, v in enumerate(vs)]
    verdicts = [{"query_id": f"c{i}", "prompt_id": p, "accept": bool(v)} for p, vs in PRED.items() for i, v in enumerate(vs)]
    verdicts += [{"query_id": f"n{i}", "prompt_id": p, "accept": bool(v)} for p, vs in PANEL_PRED.items() for i, v in enumerate(vs)]
    moves = pd.Series("address", index=[f"c{i}" for i in range(10)] + [f"n{i}" for i in range(4)])
    return pd.DataFrame(labels), pd.DataFrame(verdicts), moves


def test_agreement_table_and_selection_by_hand():
    labels, verdicts, moves = _fixture()
    assert calibration_annotator(labels, None) == "A"  # labelled the most pairs
    table, chosen = agreement_table(labels, verdicts, moves, calibrator="A")
    assert chosen == {"address": ["p1", "p3"]}  # F1 .80 and .75 beat .67
    row = table.set_index("system")
    assert row.loc["p1", "n"] == 10 and row.loc["p1", "f1"] == pytest.approx(0.8)
    assert row.loc["p1", "selected"] and row.loc["p3", "selected"] and not row.loc["p2", "selected"]
    # AND of p1 and p3 equals p3 on the calibration pairs
    assert row.loc[AND_RULE, "f1"] == pytest.approx(0.75) and row.loc[AND_RULE, "kappa"] == pytest.approx(0.6)
    # humans: pairwise F1 A-B 2/3, A-C 4/5, B-C 1/2; agreement 3/4, 3/4, 1/2
    assert row.loc[HUMAN, "panel_f1"] == pytest.approx((2 / 3 + 0.8 + 0.5) / 3)
    assert row.loc[HUMAN, "panel_agreement"] == pytest.approx((0.75 + 0.75 + 0.5) / 3)
    assert math.isnan(row.loc[HUMAN, "f1"])  # no calibration score for humans (a dash in Table 9)
    # p1 = the panel majority: F1 vs A 1, vs B 2/3, vs C 4/5; majority F1 1; unanimous pairs n0 (yes), n3 (no)
    assert row.loc["p1", "panel_f1"] == pytest.approx((1 + 2 / 3 + 0.8) / 3)
    assert row.loc["p1", "panel_agreement"] == pytest.approx((1 + 0.75 + 0.75) / 3)
    assert row.loc["p1", "panel_f1_majority"] == pytest.approx(1.0)
    assert row.loc["p1", "panel_f1_unanimous"] == pytest.approx(1.0) and row.loc["p1", "panel_unanimous_n"] == 2
    # p3 = [1,0,0,0]: vs A 2/3, vs B 1, vs C 1/2; vs majority [1,1,0,0] 2/3
    assert row.loc["p3", "panel_f1"] == pytest.approx((2 / 3 + 1 + 0.5) / 3)
    assert row.loc["p3", "panel_f1_majority"] == pytest.approx(2 / 3)
    # the AND rule on the panel is p1 AND p3 = p3
    assert row.loc[AND_RULE, "panel_f1"] == pytest.approx(row.loc["p3", "panel_f1"])
    text = format_table(table)
    assert "Both (AND)" in text and "0.80" in text


def test_configured_selection_and_ties():
    labels, verdicts, moves = _fixture()
    table, chosen = agreement_table(labels, verdicts, moves, calibrator="A", selected={"address": ["p2", "p3"]})
    assert chosen == {"address": ["p2", "p3"]}
    assert table.set_index("system").loc[AND_RULE, "f1"] == pytest.approx(0.75)  # p2 AND p3 = p3
    # p0: TP 5, FP 2 (c4, c9) -> F1 10/12, the best; "p1b" copies p1, so F1 and κ tie and the id decides
    extra = {"p0": [1, 1, 1, 1, 1, 0, 0, 0, 1, 0][:9] + [1], "p1b": PRED["p1"]}
    v = pd.concat([verdicts, pd.DataFrame([{"query_id": f"c{i}", "prompt_id": p, "accept": bool(x)}
                                           for p, xs in extra.items() for i, x in enumerate(xs)])])
    table, chosen = agreement_table(labels, v, moves, calibrator="A", k=3)
    assert table.set_index("system").loc["p0", "f1"] == pytest.approx(10 / 12)
    assert chosen["address"] == ["p0", "p1", "p1b"]


def test_load_labels(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text(
        "pair_id,annotator,label,query\n"
        "q1,ann,accept,x\nq2,ann,REJECT,y\nq3,ann,1,z\nq4,ann,no,w\nq5,ann,,unlabelled\nq1,ann,yes,again\n"
    )
    labels = load_labels(path)
    assert labels.set_index("query_id")["label"].to_dict() == {"q1": True, "q2": False, "q3": True, "q4": False}
    path.write_text("query_id,annotator,label\nq1,ann,maybe\n")
    with pytest.raises(LabelsError, match="maybe"):
        load_labels(path)
    path.write_text("query_id,annotator,label\nq1,ann,accept\nq1,ann,reject\n")
    with pytest.raises(LabelsError, match="both accept and reject"):
        load_labels(path)
    path.write_text("query_id,label\nq1,accept\n")
    with pytest.raises(LabelsError, match="annotator"):
        load_labels(path)
    with pytest.raises(LabelsError, match="not found"):
        load_labels(tmp_path / "nope.csv")
    with pytest.raises(LabelsError, match="no labels"):
        calibration_annotator(pd.DataFrame({"query_id": ["q"], "annotator": ["a"], "label": [True]}), "b")
