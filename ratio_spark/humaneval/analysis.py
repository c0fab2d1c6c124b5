"""The paper's analyses of a human evaluation (§5.3, appendix G, Tables 2, 11 and 12), from a study's tables.

Only complete assignments count (every candidate of both lists marked and a preference given: the paper's
rule). A candidate marked useful is relevant. Per annotation (one assignment) and system:

* ``HR`` 1 if a useful candidate is in the top ``depth``; ``P`` useful candidates / depth; ``MRR`` 1 / rank of
  the first useful candidate (0 if none);
* ``gold`` the gold sentence is in the list; ``gold_useful`` it is and was marked useful; ``beyond`` a useful
  candidate other than the gold is in the list; ``MRR_gold`` 1 / rank of the gold (gold-only, as the silver
  metrics).

A query labelled twice scores the mean of its annotations; move and overall figures are means over queries.
Each metric's difference (second system − first) is tested with the evaluation's paired sign-flip permutation
test over queries (``evaluation.significance.paired_permutation_test``, checked against
``scipy.stats.permutation_test``; when 2^n is at most the number of permutations every sign vector is
enumerated and the p-value is exact). Preferences, and Table 12's candidate counts, are pooled over
annotations, as in the paper.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ratio_spark.core.errors import UserError
from ratio_spark.evaluation.metrics import first_relevant_rank
from ratio_spark.evaluation.significance import paired_permutation_test

METRICS = ("HR", "P", "MRR")  # Table 2
BEYOND = ("HR", "MRR", "gold", "gold_useful", "beyond", "MRR_gold")  # Table 11
MOVE_ORDER = ("specify", "address", "broaden")
ALL = "all"


class AnalysisError(UserError, ValueError):
    """A study that cannot be analysed (no complete assignment, inconsistent tables)."""


def _list_metrics(ranked: list[str], useful: set[str], gold: str, depth: int) -> dict:
    top = ranked[:depth]
    first = first_relevant_rank(top, useful)
    gold_rank = first_relevant_rank(top, {gold})
    return {
        "HR": float(first is not None), "P": sum(c in useful for c in top) / depth,
        "MRR": 1.0 / first if first else 0.0, "gold": float(gold_rank is not None),
        "gold_useful": float(gold_rank is not None and gold in useful),
        "beyond": float(any(c in useful and c != gold for c in top)), "MRR_gold": 1.0 / gold_rank if gold_rank else 0.0,
    }


@dataclass
class Analysis:
    systems: list[str]  # in the study's order: differences are systems[1] - systems[0]
    per_annotation: pd.DataFrame  # assignment_id, annotator, query_id, move, system, metrics, candidate counts
    per_query: pd.DataFrame  # query_id, move, system, annotations, metrics (mean over annotations)
    preferences: pd.DataFrame  # assignment_id, query_id, move, annotator, preference (system name or "tie")
    labels: dict[int, dict[str, int]]  # assignment id -> candidate id -> 1 useful / 0 not
    counts: dict
    depth: int
    permutations: int
    seed: int

    # -------------------------------------------------------------- tables

    def moves(self) -> list[str]:
        present = set(self.per_query["move"])
        return [m for m in MOVE_ORDER if m in present] + sorted(present - set(MOVE_ORDER))

    def _groups(self):
        for move in self.moves():
            yield move, self.per_query[self.per_query["move"] == move], self.per_annotation[self.per_annotation["move"] == move], \
                self.preferences[self.preferences["move"] == move]
        yield ALL, self.per_query, self.per_annotation, self.preferences

    def table2(self) -> pd.DataFrame:
        """Rows (move, system): queries, HR/P/MRR (%), preference counts, ties and the p-value of each metric."""
        rows = []
        for move, queries, _, prefs in self._groups():
            wide = queries.pivot(index="query_id", columns="system", values=list(METRICS))
            p_values = {m: paired_permutation_test(wide[(m, self.systems[0])], wide[(m, self.systems[1])],
                                                   permutations=self.permutations, seed=self.seed) for m in METRICS}
            ties = int((prefs["preference"] == "tie").sum())
            for system in self.systems:
                mine = queries[queries["system"] == system]
                rows.append({"move": move, "system": system, "queries": len(mine),
                             **{m: 100 * mine[m].mean() for m in METRICS},
                             "preferred": int((prefs["preference"] == system).sum()), "tie": ties,
                             **{f"p_{m}": p_values[m] for m in METRICS}})
        return pd.DataFrame(rows)

    def table11(self) -> pd.DataFrame:
        """Rows (move, system): HR, MRR, gold, gold useful, beyond, gold-only MRR (% of queries), their ratio, and
        the rate at which annotators marked the gold useful when it was in the list (% of annotations)."""
        rows = []
        for move, queries, annotations, _ in self._groups():
            for system in self.systems:
                mine = queries[queries["system"] == system]
                seen = annotations[(annotations["system"] == system) & (annotations["gold"] == 1)]
                row = {"move": move, "system": system, "queries": len(mine), **{m: 100 * mine[m].mean() for m in BEYOND}}
                row["MRR_all_over_gold"] = row["MRR"] / row["MRR_gold"] if row["MRR_gold"] else float("nan")
                row["gold_marked_useful_rate"] = 100 * seen["gold_useful"].mean() if len(seen) else float("nan")
                row["annotations_with_gold"] = len(seen)
                rows.append(row)
        return pd.DataFrame(rows)

    def table12(self) -> pd.DataFrame:
        """Rows (move, system): useful non-gold candidates pooled over annotations, % from another paper than
        the query's, distinct papers among them, and % of all non-gold candidates that come from another paper."""
        rows = []
        for move, _, annotations, _ in self._groups():
            for system in self.systems:
                mine = annotations[annotations["system"] == system]
                useful = int(mine["useful_nongold"].sum())
                papers = set(itertools.chain.from_iterable(mine["useful_nongold_papers"]))
                nongold = int(mine["nongold"].sum())
                rows.append({"move": move, "system": system, "useful": useful,
                             "cross": 100 * mine["useful_nongold_cross"].sum() / useful if useful else float("nan"),
                             "papers": len(papers),
                             "all_cross": 100 * mine["nongold_cross"].sum() / nongold if nongold else float("nan")})
        return pd.DataFrame(rows)

    def agreement(self) -> pd.DataFrame:
        """Agreement on queries labelled by two or more annotators, per annotator pair on the same query:
        candidate usefulness (% agreement, Cohen's kappa) and list preference (systems or tie)."""
        from sklearn.metrics import cohen_kappa_score

        labels = self.labels
        rows = []
        for move, _, annotations, prefs in self._groups():
            pair_labels, pair_prefs = [], []
            by_query = annotations.drop_duplicates("assignment_id").groupby("query_id")["assignment_id"].apply(sorted)
            preference = prefs.set_index("assignment_id")["preference"]
            for assignment_ids in by_query:
                for x, y in itertools.combinations(assignment_ids, 2):
                    shared = sorted(set(labels[x]) & set(labels[y]))
                    pair_labels += [(labels[x][c], labels[y][c]) for c in shared]
                    pair_prefs.append((preference[x], preference[y]))
            row = {"move": move, "query_pairs": len(pair_prefs), "candidate_pairs": len(pair_labels)}
            for name, pairs in (("label", pair_labels), ("preference", pair_prefs)):
                if pairs:
                    first, second = zip(*pairs)
                    row[f"{name}_agreement"] = 100 * float(np.mean([a == b for a, b in pairs]))
                    row[f"{name}_kappa"] = (float(cohen_kappa_score(first, second))
                                            if len(set(first) | set(second)) > 1 else float("nan"))
                else:
                    row[f"{name}_agreement"] = row[f"{name}_kappa"] = float("nan")
            rows.append(row)
        return pd.DataFrame(rows)


def analyse(frames: dict[str, pd.DataFrame], *, depth: int, permutations: int = 10_000, seed: int = 0) -> Analysis:
    """Per-annotation and per-query metrics of every complete assignment (``Study.frames()``)."""
    systems = frames["systems"].sort_values("position")["system"].tolist()
    assignments = frames["assignments"]
    complete = assignments[assignments["completed_at"].notna()]
    counts = {"assignments": len(assignments), "complete": len(complete), "incomplete": len(assignments) - len(complete),
              "queries_in_study": len(frames["queries"])}
    if complete.empty:
        raise AnalysisError(f"no complete assignment yet ({len(assignments)} assigned): nothing to analyse")
    queries = frames["queries"].set_index("query_id")
    paper_of = frames["candidates"].set_index("candidate_id")["paper_id"].to_dict()
    ranked = {key: group.sort_values("rank")["candidate_id"].tolist()
              for key, group in frames["lists"].groupby(["query_id", "system"])}
    labels: dict[int, dict[str, int]] = {aid: dict(zip(g["candidate_id"], g["useful"].astype(int)))
                                         for aid, g in frames["labels"].groupby("assignment_id")}
    rows, prefs = [], []
    for a in complete.itertuples(index=False):
        query = queries.loc[a.query_id]
        useful = {c for c, v in labels.get(a.assignment_id, {}).items() if v}
        for system in systems:
            top = ranked.get((a.query_id, system), [])[:depth]
            metrics = _list_metrics(top, useful, query.gold_candidate_id, depth)
            nongold = [c for c in top if c != query.gold_candidate_id]
            useful_nongold = [c for c in nongold if c in useful]
            other_paper = [c for c in nongold if paper_of.get(c) != query.paper_id]
            rows.append({
                "assignment_id": a.assignment_id, "annotator": a.annotator, "query_id": a.query_id, "move": query.move,
                "system": system, **metrics, "listed": len(top), "nongold": len(nongold),
                "nongold_cross": len(other_paper), "useful_nongold": len(useful_nongold),
                "useful_nongold_cross": sum(c in other_paper for c in useful_nongold),
                "useful_nongold_papers": sorted({str(paper_of.get(c)) for c in useful_nongold}),
            })
        shown = {"A": query.system_a, "B": query.system_b, "tie": "tie"}
        prefs.append({"assignment_id": a.assignment_id, "query_id": a.query_id, "move": query.move,
                      "annotator": a.annotator, "shown": a.preference, "preference": shown[a.preference]})
    per_annotation = pd.DataFrame(rows)
    metric_columns = list(dict.fromkeys(METRICS + BEYOND))
    per_query = (per_annotation.groupby(["query_id", "move", "system"], sort=True)
                 .agg(annotations=("assignment_id", "nunique"), **{m: (m, "mean") for m in metric_columns})
                 .reset_index())
    counts["queries_analysed"] = int(per_query["query_id"].nunique())
    counts["queries_labelled_twice_or_more"] = int((per_query.drop_duplicates("query_id")["annotations"] > 1).sum())
    return Analysis(systems=systems, per_annotation=per_annotation, per_query=per_query,
                    preferences=pd.DataFrame(prefs), labels=labels, counts=counts, depth=depth, permutations=permutations, seed=seed)
