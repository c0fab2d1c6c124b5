"""Calibration of the judge against human labels, and the agreement table (the paper's Table 9).

Labels come from a CSV with one row per (pair, annotator): ``query_id`` (or ``pair_id``), ``annotator``,
``label`` (accept/reject, yes/no, 1/0, true/false); other columns (the sheet's texts) are ignored. Two
sets of pairs, as in the paper:

* **calibration**: pairs labelled by the calibration annotator alone. Each prompt is scored against that
  annotator (P, R, F1, Cohen's κ, percentage agreement), and the two prompts with the highest F1 per move
  are selected (ties: higher κ, then prompt id).
* **panel**: pairs labelled by two or more annotators (held out from selection). Each prompt is scored
  against every annotator and the scores averaged over prompt–annotator pairs; humans are scored against
  each other, averaged over annotator pairs, so the rows compare directly. Also F1 against the panel
  majority (ties left out) and on the pairs where the panel is unanimous.

An optional ``set`` column (``calibration`` / ``panel``) overrides that inference. The positive class is
*accept*. Metrics come from scikit-learn.
"""

from __future__ import annotations

import io
import itertools
import math
from pathlib import Path

import pandas as pd

from ratio_spark.core.errors import UserError
from ratio_spark.core.files import read_text

AND_RULE = "Both (AND)"
HUMAN = "Human"

_TRUE = {"accept", "accepted", "yes", "y", "1", "true", "t"}
_FALSE = {"reject", "rejected", "no", "n", "0", "false", "f"}


class LabelsError(UserError, ValueError):
    """The labels CSV cannot be used as it is; the message says which row or column."""


def load_labels(path: str | Path) -> pd.DataFrame:
    """Read and check a labels CSV: columns query_id, annotator, label (bool), set (calibration/panel)."""
    if not Path(path).is_file():
        raise LabelsError(f"labels file not found: {path}")
    try:
        raw = pd.read_csv(io.StringIO(read_text(path, LabelsError)), dtype=str, keep_default_na=False, comment=None)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        raise LabelsError(f"{path}: not a labels CSV ({' '.join(str(exc).split())})") from None
    if "query_id" not in raw.columns and "pair_id" in raw.columns:
        raw = raw.rename(columns={"pair_id": "query_id"})
    missing = [c for c in ("query_id", "annotator", "label") if c not in raw.columns]
    if missing:
        raise LabelsError(f"{path}: missing column(s) {missing}; need query_id (or pair_id), annotator, label")
    raw = raw.assign(**{c: raw[c].str.strip() for c in ("query_id", "annotator", "label")})
    unlabelled = raw["label"].eq("")
    raw = raw[~unlabelled]  # a sheet row the annotator left empty is not a label
    norm = raw["label"].str.lower()
    bad = ~norm.isin(_TRUE | _FALSE)
    if bad.any():
        row = raw[bad].iloc[0]
        raise LabelsError(
            f"{path}: label {row['label']!r} for {row['query_id']} by {row['annotator']} is not one of "
            "accept/reject, yes/no, 1/0, true/false"
        )
    if raw["annotator"].eq("").any() or raw["query_id"].eq("").any():
        raise LabelsError(f"{path}: every labelled row needs a query_id and an annotator")
    labels = pd.DataFrame({
        "query_id": raw["query_id"].values, "annotator": raw["annotator"].values, "label": norm.isin(_TRUE).values,
    })
    for column in ("move", "set"):
        if column in raw.columns:
            labels[column] = raw[column].str.strip().str.lower().values
    dupes = labels.duplicated(["query_id", "annotator"], keep=False)
    if dupes.any():
        conflicting = labels[dupes].groupby(["query_id", "annotator"])["label"].nunique()
        if (conflicting > 1).any():
            qid, ann = conflicting[conflicting > 1].index[0]
            raise LabelsError(f"{path}: {ann} labelled {qid} both accept and reject")
        labels = labels.drop_duplicates(["query_id", "annotator"])
    if "set" in labels.columns:
        odd = ~labels["set"].isin(["calibration", "panel", ""])
        if odd.any():
            raise LabelsError(f"{path}: set must be calibration or panel (got {labels[odd]['set'].iloc[0]!r})")
    return labels.reset_index(drop=True)


def calibration_annotator(labels: pd.DataFrame, name: str | None) -> str:
    """The configured annotator, or the one who labelled the most pairs (ties: by name)."""
    counts = labels.groupby("annotator").size()
    if name is None:
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    if name not in counts:
        raise LabelsError(f"calibration annotator {name!r} has no labels; annotators: {sorted(counts.index)}")
    return name


def assign_sets(labels: pd.DataFrame, calibrator: str) -> pd.DataFrame:
    """Add ``set`` where the CSV lacks it: panel if two or more annotators labelled the pair, else
    calibration if the calibration annotator did; other single-annotator pairs are ``unused``."""
    labels = labels.copy()
    n = labels.groupby("query_id")["annotator"].transform("nunique")
    inferred = pd.Series("unused", index=labels.index)
    inferred[n >= 2] = "panel"
    by_calibrator = labels.groupby("query_id")["annotator"].transform(lambda s: calibrator in set(s))
    inferred[(n == 1) & by_calibrator] = "calibration"
    if "set" in labels.columns:
        labels["set"] = labels["set"].where(labels["set"] != "", inferred)
    else:
        labels["set"] = inferred
    return labels


def binary_scores(predicted, gold) -> dict[str, float]:
    """P, R, F1 (positive class: accept), Cohen's κ and agreement of two label vectors."""
    from sklearn.metrics import accuracy_score, cohen_kappa_score, precision_recall_fscore_support

    predicted, gold = list(map(bool, predicted)), list(map(bool, gold))
    if not gold:
        return {"n": 0, "precision": math.nan, "recall": math.nan, "f1": math.nan, "kappa": math.nan, "agreement": math.nan}
    p, r, f, _ = precision_recall_fscore_support(
        gold, predicted, labels=[True], average="binary", pos_label=True, zero_division=0.0
    )
    if len(set(gold) | set(predicted)) == 1:
        kappa = math.nan  # one class everywhere: κ is 0/0
    else:
        kappa = float(cohen_kappa_score(gold, predicted))
    return {"n": len(gold), "precision": float(p), "recall": float(r), "f1": float(f), "kappa": kappa,
            "agreement": float(accuracy_score(gold, predicted))}


def _verdict_matrix(verdicts: pd.DataFrame) -> pd.DataFrame:
    """query_id x prompt_id -> accept (bool, NaN where the prompt gave no verdict)."""
    usable = verdicts[verdicts["accept"].notna()]
    return usable.pivot_table(index="query_id", columns="prompt_id", values="accept", aggfunc="first")


def _with_and_rule(matrix: pd.DataFrame, selected: list[str]) -> pd.DataFrame:
    present = [p for p in selected if p in matrix.columns]
    if len(present) == len(selected) and present:
        both = matrix[present]
        matrix = matrix.assign(**{AND_RULE: both.all(axis=1).where(both.notna().all(axis=1))})
    return matrix


def select_best(calibration_scores: pd.DataFrame, k: int = 2) -> dict[str, list[str]]:
    """Per move, the ``k`` prompts with the highest F1 against the calibration annotator
    (ties: higher κ, then prompt id)."""
    rows = calibration_scores[~calibration_scores["system"].isin([AND_RULE, HUMAN])]
    chosen: dict[str, list[str]] = {}
    for move, group in rows.groupby("move", sort=True):
        ranked = group.assign(_k=group["kappa"].fillna(-2.0)).sort_values(
            ["f1", "_k", "system"], ascending=[False, False, True], kind="stable"
        )
        chosen[move] = ranked["system"].head(k).tolist()
    return chosen


def _calibration_rows(move, matrix, cal_labels) -> list[dict]:
    rows = []
    gold = cal_labels.set_index("query_id")["label"]
    for system in matrix.columns:
        pred = matrix[system].dropna()
        common = pred.index.intersection(gold.index)
        scores = binary_scores(pred.loc[common].astype(bool), gold.loc[common])
        rows.append({"move": move, "system": system, **{f"{k}": v for k, v in scores.items()}})
    return rows


def _panel_rows(move, matrix, panel: pd.DataFrame) -> list[dict]:
    wide = panel.pivot_table(index="query_id", columns="annotator", values="label", aggfunc="first")
    annotators = list(wide.columns)
    votes = wide.notna().sum(axis=1)
    yes = wide.fillna(False).astype(bool).sum(axis=1)
    majority = pd.Series(pd.NA, index=wide.index, dtype="object")
    majority[yes * 2 > votes] = True
    majority[yes * 2 < votes] = False  # ties stay NA and are left out
    unanimous = (yes == votes) | (yes == 0)

    def mean_against(pred: pd.Series, against: list[str]) -> tuple[float, float]:
        f1s, agrs = [], []
        for annotator in against:
            gold = wide[annotator].dropna()
            common = pred.index.intersection(gold.index)
            if len(common):
                s = binary_scores(pred.loc[common].astype(bool), gold.loc[common].astype(bool))
                f1s.append(s["f1"]); agrs.append(s["agreement"])
        return (sum(f1s) / len(f1s) if f1s else math.nan, sum(agrs) / len(agrs) if agrs else math.nan)

    rows = []
    for system in matrix.columns:
        pred = matrix[system].dropna()
        pred = pred[pred.index.isin(wide.index)]
        if pred.empty:
            continue
        f1, agr = mean_against(pred, annotators)
        maj = majority.dropna()
        common = pred.index.intersection(maj.index)
        f1_majority = binary_scores(pred.loc[common].astype(bool), maj.loc[common].astype(bool))["f1"] if len(common) else math.nan
        una = wide.index[unanimous]
        common_u = pred.index.intersection(una)
        una_label = yes.loc[common_u] > 0
        f1_unanimous = binary_scores(pred.loc[common_u].astype(bool), una_label)["f1"] if len(common_u) else math.nan
        rows.append({"move": move, "system": system, "panel_n": int(len(pred)), "panel_f1": f1, "panel_agreement": agr,
                     "panel_f1_majority": f1_majority, "panel_f1_unanimous": f1_unanimous,
                     "panel_unanimous_n": int(len(common_u))})
    pair_f1, pair_agr = [], []
    for a, b in itertools.combinations(annotators, 2):
        both = wide[[a, b]].dropna()
        if len(both):
            s = binary_scores(both[a].astype(bool), both[b].astype(bool))
            pair_f1.append(s["f1"]); pair_agr.append(s["agreement"])
    if pair_f1:
        rows.append({"move": move, "system": HUMAN, "panel_n": int(len(wide)),
                     "panel_f1": sum(pair_f1) / len(pair_f1), "panel_agreement": sum(pair_agr) / len(pair_agr),
                     "panel_f1_majority": math.nan, "panel_f1_unanimous": math.nan,
                     "panel_unanimous_n": int(unanimous.sum())})
    return rows


def agreement_table(
    labels: pd.DataFrame,
    verdicts: pd.DataFrame,
    moves: pd.Series,
    *,
    calibrator: str,
    selected: dict[str, list[str]] | None = None,
    k: int = 2,
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """The agreement table and the selection it implies.

    ``verdicts``: long rows (query_id, prompt_id, accept) for every prompt variant on the labelled pairs.
    ``moves``: query_id -> move. ``selected``: the prompts of the AND rule; None selects them here from
    the calibration scores (the paper's procedure).
    Returns one row per (move, system) with calibration columns (n, precision, recall, f1, kappa,
    agreement) and panel columns (panel_*), and the per-move selection.
    """
    labels = assign_sets(labels, calibrator)
    labels = labels.assign(move=labels["query_id"].map(moves))
    unknown = labels["move"].isna()
    if unknown.any():
        raise LabelsError(f"{int(unknown.sum())} labelled pairs are not in the queries table "
                          f"(e.g. {labels.loc[unknown, 'query_id'].iloc[0]})")
    verdicts = verdicts.assign(move=verdicts["query_id"].map(moves))
    cal_rows, panel_rows = [], []
    matrices = {}
    for move in sorted(labels["move"].unique()):
        matrix = _verdict_matrix(verdicts[verdicts["move"] == move])
        matrices[move] = matrix
        cal = labels[(labels["move"] == move) & (labels["set"] == "calibration") & (labels["annotator"] == calibrator)]
        if len(cal):
            cal_rows += _calibration_rows(move, matrix, cal)
    cal_frame = pd.DataFrame(cal_rows, columns=["move", "system", "n", "precision", "recall", "f1", "kappa", "agreement"])
    chosen = dict(selected) if selected is not None else select_best(cal_frame, k=k)
    for move, matrix in matrices.items():
        picks = chosen.get(move, [])
        matrix = _with_and_rule(matrix, picks)
        if picks and AND_RULE in matrix.columns:
            cal = labels[(labels["move"] == move) & (labels["set"] == "calibration") & (labels["annotator"] == calibrator)]
            if len(cal):
                cal_frame = pd.concat([cal_frame, pd.DataFrame(_calibration_rows(move, matrix[[AND_RULE]], cal))])
        panel = labels[(labels["move"] == move) & (labels["set"] == "panel")]
        if len(panel):
            panel_rows += _panel_rows(move, matrix, panel)
    panel_frame = pd.DataFrame(panel_rows, columns=["move", "system", "panel_n", "panel_f1", "panel_agreement",
                                                    "panel_f1_majority", "panel_f1_unanimous", "panel_unanimous_n"])
    table = cal_frame.merge(panel_frame, on=["move", "system"], how="outer")
    table["selected"] = [s in chosen.get(m, []) for m, s in zip(table["move"], table["system"])]
    order = {HUMAN: 0, AND_RULE: 2}
    table = table.assign(_o=table["system"].map(lambda s: order.get(s, 1)), _s=~table["selected"]).sort_values(
        ["move", "_o", "_s", "system"]).drop(columns=["_o", "_s"]).reset_index(drop=True)
    return table, chosen


def format_table(table: pd.DataFrame) -> str:
    """Table 9's layout as text: panel columns left, calibration columns right, '-' where undefined."""
    def num(v, pct=False):
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return "-"
        return f"{100 * v:.1f}" if pct else f"{v:.2f}"

    head = (f"{'move':<8} {'system':<18} {'sel':<3} | {'F1':>5} {'Agr%':>5} {'F1maj':>5} {'F1una':>5} {'n':>4} |"
            f" {'P':>5} {'R':>5} {'F1':>5} {'κ':>5} {'Agr%':>5} {'n':>4}")
    lines = ["panel (left): mean over annotator pairs / prompt-annotator pairs;"
             " calibration (right): against the calibration annotator", head, "-" * len(head)]
    for r in table.itertuples(index=False):
        def cnt(v):
            return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(int(v))
        lines.append(
            f"{r.move:<8} {r.system[:18]:<18} {'*' if r.selected else '':<3} | {num(r.panel_f1):>5} "
            f"{num(r.panel_agreement, True):>5} {num(r.panel_f1_majority):>5} {num(r.panel_f1_unanimous):>5} "
            f"{cnt(r.panel_n):>4} | {num(r.precision):>5} {num(r.recall):>5} {num(r.f1):>5} {num(r.kappa):>5} "
            f"{num(r.agreement, True):>5} {cnt(r.n):>4}"
        )
    return "\n".join(lines)
