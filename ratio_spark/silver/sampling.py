"""Stratified sampling of test pairs per move, with equal allocation across markers (appendix E).

Each marker contributes the same number of pairs, or all of its pairs if it has fewer, so that frequent
markers ("for example") do not dominate the sample. The remainder of an uneven split goes to markers in
a seeded hash order. Every choice is made by ranking sha256 hashes of (seed, id), never by a random
generator's state, so the same tables and seed give the same sample in any process, on any machine, in
any row order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal, Mapping

import pandas as pd

SampleSize = int | Literal["all"]


def stable_rank_key(seed: int | str, key: str) -> str:
    """The sort key that orders items for a seed: the hex sha256 of ``seed ␟ key``."""
    return hashlib.sha256(f"{seed}\x1f{key}".encode("utf-8")).hexdigest()


def equal_allocation(counts: Mapping[str, int], size: int, seed: int | str = 0) -> dict[str, int]:
    """How many items each stratum gives so that the total is ``min(size, sum(counts))``.

    Water-filling: strata smaller than an equal share give everything, the rest share what is left
    equally; the ``r`` units an even split cannot place go to ``r`` of the remaining strata, chosen by
    their seeded hash order (so no stratum name is favoured across seeds).
    """
    if size < 0:
        raise ValueError(f"sample size must be >= 0 (got {size})")
    allocation = {stratum: 0 for stratum in counts}
    if sum(counts.values()) <= size:
        return dict(counts)
    remaining = size
    open_strata = sorted(counts, key=lambda s: (counts[s], s))  # ascending size, name breaks ties
    while open_strata:
        share = remaining // len(open_strata)
        smallest = open_strata[0]
        if counts[smallest] > share:
            break
        allocation[smallest] = counts[smallest]
        remaining -= counts[smallest]
        open_strata.pop(0)
    if open_strata:
        base, extra = divmod(remaining, len(open_strata))
        lucky = set(sorted(open_strata, key=lambda s: stable_rank_key(seed, s))[:extra])
        for stratum in open_strata:
            allocation[stratum] = base + (1 if stratum in lucky else 0)
    return allocation


@dataclass
class Sample:
    pairs: pd.DataFrame  # the sampled rows, plus ``stratum`` and ``sample_rank`` (hash order within it)
    allocation: pd.DataFrame  # move, stratum, available, sampled

    def summary(self) -> dict[str, dict[str, int]]:
        grouped = self.allocation.groupby("move")[["available", "sampled"]].sum()
        out = {move: {"available": int(row.available), "sampled": int(row.sampled),
                      "strata": int((self.allocation.move == move).sum())}
               for move, row in grouped.iterrows()}
        return out


def sample_pairs(
    pairs: pd.DataFrame,
    sizes: Mapping[str, SampleSize],
    *,
    seed: int | str = 0,
    stratify_by: str = "marker_entry",
    id_column: str = "query_id",
) -> Sample:
    """Sample ``sizes[move]`` pairs of each move (``"all"``: every pair); moves absent from ``sizes`` give none."""
    for column in ("move", stratify_by, id_column):
        if column not in pairs.columns:
            raise ValueError(f"pairs lack column {column!r}")
    if pairs[id_column].duplicated().any():
        raise ValueError(f"{id_column} is not unique in the pairs to sample")
    frame = pairs.assign(
        stratum=pairs[stratify_by].fillna(""),
        _rank=[stable_rank_key(seed, str(i)) for i in pairs[id_column]],
    ).sort_values(["move", "stratum", "_rank"], kind="stable")
    frame["sample_rank"] = frame.groupby(["move", "stratum"]).cumcount()
    chosen, rows = [], []
    for move, group in frame.groupby("move", sort=True):
        counts = group.groupby("stratum").size().to_dict()
        size = sizes.get(move, 0)
        quota = dict(counts) if size == "all" else equal_allocation(counts, int(size), seed=f"{seed}:{move}")
        for stratum, available in sorted(counts.items()):
            rows.append({"move": move, "stratum": stratum, "available": int(available), "sampled": int(quota[stratum])})
        keep = group["sample_rank"] < group["stratum"].map(quota)
        chosen.append(group[keep])
    sampled = pd.concat(chosen) if chosen else frame.iloc[:0]
    sampled = sampled.drop(columns="_rank").sort_values(["move", "stratum", "sample_rank"]).reset_index(drop=True)
    allocation = pd.DataFrame(rows, columns=["move", "stratum", "available", "sampled"])
    return Sample(pairs=sampled, allocation=allocation)
