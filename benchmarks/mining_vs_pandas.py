"""`ratio-spark mine` against a single-node pandas + multiprocessing baseline of the same rules (issue 13).

The baseline is ours, written to be what a careful single-node implementation of our mining rules looks like
(the paper's stage 1 is pandas + multiprocessing): read the sentences with pyarrow, form consecutive pairs in
pandas (shift within a paragraph), keep the pairs whose second sentence opens with a marker (the same opening
regex as the Spark stage's pre-filter), cut them with the project's rules (``PairRules``, the stage's own Python rules) in a pool of
worker processes, de-duplicate on (query, gold) keeping the smallest pair id, and write the mined pairs and the
drops as Parquet. It must give the same ``mined_pairs`` rows and the same drops by reason as ``ratio-spark mine``;
``bench`` checks that on every run and fails otherwise.

    # once: 4x sentences (the same sentences under new paper ids) and a lexicon of several thousand markers
    python benchmarks/mining_vs_pandas.py prepare --sentences /work/data/acl-final/tables/sentences \\
        --workdir /work/data/minespeed
    # medians of 3, peak memory of the whole process tree (the JVM and the Python workers included); each repeat
    # also runs `floor` (start a session, count the sentences, write one row): the least any Spark command takes
    python benchmarks/mining_vs_pandas.py bench --workdir /work/data/minespeed --scales 1,4 --lexicons v1,v2,patterns

Each measured command runs in its own process tree; the peak is the largest sum of PSS (proportional set size:
a page shared by forked processes counts once) over the tree, sampled every 0.1 s with psutil; the largest sum of
RSS is recorded beside it. Results go to ``benchmarks/results/mining_vs_pandas.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
ROLE_COLUMNS = ("role", "move", "category", "marker", "marker_entry", "marker_source",
                "query_cut", "query_cut_original", "gold_cut", "gold_cut_original", "drop_reason")
MINED_COLUMNS = ("pair_id", "paper_id", "pub_date", "role", "move", "category", "marker", "marker_entry",
                 "marker_source", "query_sentence_id", "gold_sentence_id", "context_text", "query_text",
                 "query_text_original", "gold_text", "gold_text_original")


# ------------------------------------------------------------------------------------------------
# prepare: the 4x sentences and the large lexicon, written once
# ------------------------------------------------------------------------------------------------

def prepare(sentences: str, workdir: Path, scales: list[int]) -> None:
    from deltalake import write_deltalake

    from ratio_spark.core.delta import read_delta

    base = read_delta(sentences)
    for scale in scales:
        target = workdir / f"sentences_x{scale}"
        if scale == 1 or target.exists():
            continue
        copies = []
        for copy in range(scale):
            paper = pa.compute.binary_join_element_wise(base["paper_id"], pa.scalar(f"#r{copy}"), "")
            table = base.set_column(base.schema.get_field_index("paper_id"), "paper_id", paper)
            sentence_id = pa.compute.binary_join_element_wise(
                paper, *[pa.compute.cast(table[c], pa.string()) for c in ("section_idx", "para_idx", "sent_idx")], ":")
            copies.append(table.set_column(table.schema.get_field_index("sentence_id"), "sentence_id", sentence_id))
        write_deltalake(str(target), pa.concat_tables(copies), mode="overwrite")
        print(f"wrote {target} ({scale} x {base.num_rows} sentences)")
    lexicon = workdir / "lexicon-patterns"
    if not lexicon.exists():
        _pattern_lexicon(workdir, lexicon)


def _pattern_lexicon(workdir: Path, folder: Path) -> None:
    """v2 plus every pattern-expansion candidate (`ratio-spark lexicon patterns`): ~18K markers, the size of the
    lexicon the issue's comparison used (5,725) and more, so the matcher's cost shows."""
    from ratio_spark.core.tsv import read_tsv
    from ratio_spark.lexicon.loader import COLUMNS, SHIPPED_DIR

    candidates = workdir / "pattern.tsv"
    subprocess.run([sys.executable, "-m", "ratio_spark.cli.main", "lexicon", "patterns", "--out", str(candidates)],
                   check=True, stdout=subprocess.DEVNULL)
    v2 = SHIPPED_DIR / "v2"
    rows = [row for _, row in read_tsv(v2 / "markers.tsv", COLUMNS)]
    seen = {row["marker"] for row in rows}
    for _, row in read_tsv(candidates, ("marker", "move", "source", "provenance")):
        if row["marker"] not in seen:
            seen.add(row["marker"])
            rows.append({"marker": row["marker"], "role": "move", "label": row["move"], "source": "pattern",
                         "extendable": "false", "evidence": "pattern expansion candidate (benchmark lexicon)"})
    folder.mkdir(parents=True)
    lines = ["\t".join(COLUMNS)] + ["\t".join(str(row[c]) for c in COLUMNS) for row in rows]
    (folder / "markers.tsv").write_text("\n".join(lines) + "\n")
    (folder / "ordinals.txt").write_text((v2 / "ordinals.txt").read_text())
    print(f"wrote {folder} ({len(rows)} markers)")


# ------------------------------------------------------------------------------------------------
# the pandas + multiprocessing baseline
# ------------------------------------------------------------------------------------------------

class PythonRules:
    """The rules of ``ratio-spark mine`` for one pair (``ratio_spark.lexicon.matcher.PairRules``, as the stage
    builds them from the default ``mining:`` configuration), applied row by row, as a single-node implementation
    would; ``cut`` gives the ``ROLE_COLUMNS`` values. ``bench`` checks on every run that both give the same rows."""

    def __init__(self, lexicon: str):
        from ratio_spark.lexicon.loader import load_lexicon
        from ratio_spark.pipeline.mine import pair_rules  # the one configuration -> rules mapping
        from ratio_spark.pipeline.settings import MiningConfig

        self.rules = pair_rules(load_lexicon(lexicon), MiningConfig(lexicon=lexicon))
        self.cutter = self.rules.cutter

    def cut(self, *pair) -> list | None:
        """One pair (``PAIR_INPUTS``) -> the values of ``ROLE_COLUMNS``, or None when no marker opens its second sentence."""
        cut = self.rules.cut(*pair)
        return None if cut is None else cut.fields()


_RULES: PythonRules | None = None
PAIR_INPUTS = ("query_norm", "query_original", "query_flag", "second_norm", "second_original", "second_flag")


def _init_worker(lexicon: str) -> None:
    global _RULES
    _RULES = PythonRules(lexicon)


def _cut_chunk(chunk: pd.DataFrame) -> list:
    empty = [None] * len(ROLE_COLUMNS)
    return [_RULES.cut(*values) or empty for values in zip(*(chunk[c].tolist() for c in PAIR_INPUTS))]


def baseline(sentences: str, lexicon: str, processes: int, out: Path) -> dict:
    """The rules of ``ratio-spark mine`` in pandas; writes ``mined_pairs.parquet`` and ``drops.parquet`` to ``out``."""
    from ratio_spark.core.delta import read_delta
    from ratio_spark.core.schema import Reason

    started = time.perf_counter()
    phases: dict[str, float] = {}  # where the time goes, beside mine's phase_seconds
    last = started

    def lap(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        phases[name], last = round(now - last, 2), now

    df = read_delta(sentences, ["sentence_id", "paper_id", "pub_date", "section_idx", "para_idx", "sent_idx",
                                "text", "norm_text", "norm_flag"]).to_pandas()
    df = df.sort_values(["paper_id", "section_idx", "para_idx", "sent_idx"], ignore_index=True)
    same_para = lambda k: ((df["paper_id"] == df["paper_id"].shift(k)) & (df["section_idx"] == df["section_idx"].shift(k))
                           & (df["para_idx"] == df["para_idx"].shift(k)) & (df["sent_idx"].shift(k) == df["sent_idx"] - k))
    has_next, has_prev = same_para(-1), same_para(1)
    pairs = pd.DataFrame({
        "paper_id": df["paper_id"], "pub_date": df["pub_date"],
        "query_sentence_id": df["sentence_id"], "query_original": df["text"], "query_norm": df["norm_text"],
        "query_flag": df["norm_flag"], "context_text": df["norm_text"].shift(1).where(has_prev),
        "gold_sentence_id": df["sentence_id"].shift(-1), "second_original": df["text"].shift(-1),
        "second_norm": df["norm_text"].shift(-1), "second_flag": df["norm_flag"].shift(-1),
    })[has_next]
    examined = len(pairs)
    lap("read, sort and pair")
    _init_worker(lexicon)
    opening = re.compile(_RULES.cutter.opening_regex())
    candidates = pairs[[bool(opening.match(s)) if isinstance(s, str) else False for s in pairs["second_norm"]]]
    candidates = candidates.reset_index(drop=True)
    lap("pre-filter")
    if processes > 1:
        chunks = [candidates.iloc[i::processes * 4] for i in range(processes * 4)]
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            parts = pool.map(_cut_chunk, chunks)
        cut = [None] * len(candidates)
        for i, part in enumerate(parts):
            cut[i::processes * 4] = part
    else:
        cut = _cut_chunk(candidates)
    lap("cut the candidates")
    matched = pd.concat([candidates, pd.DataFrame(cut, columns=list(ROLE_COLUMNS))], axis=1)
    matched = matched[matched["role"].notna()].copy()
    matched["pair_id"] = ["p" + hashlib.sha256(f"{q}|{g}".encode()).hexdigest()[:16]
                          for q, g in zip(matched["query_sentence_id"], matched["gold_sentence_id"])]
    kept = matched[matched["drop_reason"].isna()].sort_values("pair_id")
    first = ~kept.duplicated(["query_cut", "gold_cut"], keep="first")
    mined = kept[first].rename(columns={"query_cut": "query_text", "query_cut_original": "query_text_original",
                                        "gold_cut": "gold_text", "gold_cut_original": "gold_text_original"})
    drops = pd.concat([
        matched.loc[matched["drop_reason"].notna(), ["pair_id", "paper_id", "drop_reason"]],
        kept.loc[~first, ["pair_id", "paper_id"]].assign(drop_reason=Reason.DUPLICATE_PAIR),
    ]).rename(columns={"drop_reason": "reason"})
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(mined[list(MINED_COLUMNS)], preserve_index=False), out / "mined_pairs.parquet")
    pq.write_table(pa.Table.from_pandas(drops, preserve_index=False), out / "drops.parquet")
    lap("de-duplicate and write")
    summary = {"consecutive_pairs_examined": examined, "candidates": len(candidates), "pairs_opening_with_a_marker": len(matched),
               "mined_pairs": len(mined), "dropped_by_reason": drops["reason"].value_counts().to_dict(),
               "seconds": round(time.perf_counter() - started, 2), "phase_seconds": phases}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


# ------------------------------------------------------------------------------------------------
# floor: the least any Spark + Delta command does
# ------------------------------------------------------------------------------------------------

def floor(sentences: str, conf: str, settings: list[str], out: Path) -> int:
    """What every ``ratio-spark`` Spark command does before and after its own work, and nothing else: start the
    session the configuration describes (with the jars ``mine`` needs: Delta Lake only), read the sentences table, count its rows and
    write that count as a one-row Delta table. No Spark command can take less time than this one."""
    from ratio_spark.config import load_config
    from ratio_spark.pipeline.session import build_spark_session

    spark = build_spark_session(load_config(conf, settings).spark)
    rows = spark.read.format("delta").load(sentences).count()
    spark.createDataFrame([(rows,)], "sentences long").write.format("delta").mode("overwrite").save(str(out))
    spark.stop()
    return rows


# ------------------------------------------------------------------------------------------------
# bench: every command in its own process tree, wall time and peak memory, outputs compared
# ------------------------------------------------------------------------------------------------

def measured(command: list[str], env: dict) -> dict:
    """Run ``command``; its wall time and the peak RSS of its whole process tree (JVM and workers included)."""
    import psutil

    started = time.perf_counter()
    output_file = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(command, env=env, stdout=output_file, stderr=subprocess.STDOUT, text=True)
    root, peak_pss, peak_rss = psutil.Process(process.pid), 0, 0
    while process.poll() is None:
        pss = rss = 0
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for member in tree:
            try:
                memory = member.memory_full_info()
            except psutil.Error:
                continue
            pss, rss = pss + memory.pss, rss + memory.rss
        peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
        time.sleep(0.1)
    wall = time.perf_counter() - started
    output_file.seek(0)
    output = output_file.read()
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{output[-3000:]}")
    # PSS: forked processes (the Python workers, the pool's workers) share pages; summed RSS counts them twice.
    return {"seconds": round(wall, 2), "peak_gib": round(peak_pss / 2**30, 2),
            "peak_rss_sum_gib": round(peak_rss / 2**30, 2), "output": output}


def same_pairs(pandas_out: Path, mine_root: Path) -> dict:
    """The baseline's mined pairs and drops by reason against ``mine``'s tables; raises when they differ."""
    from ratio_spark.core.delta import read_delta

    ours = pq.read_table(pandas_out / "mined_pairs.parquet").to_pandas()
    theirs = read_delta(mine_root / "mined_pairs", list(MINED_COLUMNS)).to_pandas()
    key = lambda frame: set(map(tuple, frame[list(MINED_COLUMNS)].astype(object).where(frame[list(MINED_COLUMNS)].notna(), None)
                                .astype(str).itertuples(index=False)))
    only_pandas, only_mine = key(ours) - key(theirs), key(theirs) - key(ours)
    drops = pq.read_table(pandas_out / "drops.parquet").to_pandas()["reason"].value_counts().to_dict()
    mine_drops = read_delta(mine_root / "drops", ["stage", "reason"]).to_pandas()
    mine_drops = mine_drops[mine_drops["stage"] == "mine"]["reason"].value_counts().to_dict()
    if only_pandas or only_mine or drops != mine_drops:
        raise SystemExit(f"the baseline and mine differ: {len(only_pandas)} rows only in pandas, {len(only_mine)} "
                         f"only in mine; drops {drops} vs {mine_drops}")
    return {"mined_pairs": len(ours), "drops": sum(drops.values())}


def bench(args) -> None:
    workdir = Path(args.workdir)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    out_file = Path(args.out)
    results = json.loads(out_file.read_text()) if out_file.exists() and args.append else {"runs": {}}
    for lexicon in args.lexicons.split(","):
        lexicon_arg = str(workdir / "lexicon-patterns") if lexicon == "patterns" else lexicon
        for scale in [int(s) for s in args.scales.split(",")]:
            sentences = args.sentences if scale == 1 else str(workdir / f"sentences_x{scale}")
            runs: dict[str, list] = {}
            for repeat in range(args.repeats):
                for processes in map(int, args.processes.split(",")):
                    target = workdir / "runs" / f"pandas-{lexicon}-x{scale}-p{processes}"
                    run = measured([sys.executable, __file__, "baseline", "--sentences", sentences, "--lexicon",
                                    lexicon_arg, "--processes", str(processes), "--out", str(target)], env)
                    run["phase_seconds"] = json.loads((target / "summary.json").read_text())["phase_seconds"]
                    runs.setdefault(f"pandas_{processes}_processes", []).append(run)
                mine_root = workdir / "runs" / f"mine-{lexicon}-x{scale}"
                run = measured([sys.executable, "-m", "ratio_spark.cli.main", "mine", "--conf", str(REPO / "conf/acl.yaml"),
                                "--set", f"tables.root={mine_root}", "--set", f"tables.overrides.sentences={sentences}",
                                "--set", f"mining.lexicon={lexicon_arg}", *sum((["--set", s] for s in args.set), []),
                                "--summary-json", str(mine_root / "summary.json")], env)
                runs.setdefault("ratio_spark_mine", []).append(run)
                runs.setdefault("spark_floor", []).append(measured(
                    [sys.executable, __file__, "floor", "--sentences", sentences, "--conf", str(REPO / "conf/acl.yaml"),
                     *sum((["--set", s] for s in args.set), []), "--out", str(workdir / "runs" / "floor")], env))
                checked = same_pairs(workdir / "runs" / f"pandas-{lexicon}-x{scale}-p1", mine_root)
                load = os.getloadavg()
                print(f"{lexicon} {scale}x repeat {repeat + 1}: " + ", ".join(
                    f"{name} {r[-1]['seconds']} s {r[-1]['peak_gib']} GiB" for name, r in runs.items())
                    + f"; same pairs {checked}; load {load[0]:.2f}", flush=True)
                for r in runs.values():
                    r[-1]["load_1min"] = round(load[0], 2)
            summary = json.loads((mine_root / "summary.json").read_text())
            summary = summary[-1] if isinstance(summary, list) else summary  # one summary per stage run
            results["runs"][f"{lexicon}-x{scale}"] = {
                "sentences": sentences, "lexicon": lexicon_arg, "mine_settings": args.set,
                "pairs_examined": summary.get("consecutive_pairs_examined"),
                "mine_summary_seconds": summary.get("seconds"), "phases": summary.get("phase_seconds"),
                **{name: {"median_seconds": statistics.median(r["seconds"] for r in rs),
                          "median_peak_gib": statistics.median(r["peak_gib"] for r in rs),
                          "runs": [{k: v for k, v in r.items() if k != "output"} for r in rs]}
                   for name, rs in runs.items()},
                "checked": checked,
            }
            out_file.parent.mkdir(parents=True, exist_ok=True)
            out_file.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


MINE_TABLES = ("mined_pairs", "drops", "stats_mining", "stats_drops")


def compare(before: Path, after: Path) -> int:
    """The tables ``ratio-spark mine`` writes, of two table roots (e.g. main's code and this code), row for row
    (``pools_speed.compare``: multisets of rows; the mine rows of ``drops`` and ``stats_drops``); 1 when any differs."""
    sys.path.insert(0, str(Path(__file__).parent))
    from pools_speed import compare as compare_tables

    return compare_tables(before, after, MINE_TABLES, stage="mine")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare", help="write the replicated sentences and the pattern lexicon once")
    p.add_argument("--sentences", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--scales", default="4")
    b = commands.add_parser("baseline", help="run the pandas + multiprocessing baseline once")
    b.add_argument("--sentences", required=True)
    b.add_argument("--lexicon", default="v1")
    b.add_argument("--processes", type=int, default=1)
    b.add_argument("--out", required=True)
    f = commands.add_parser("floor", help="start a session, count the sentences, write one row: the least a Spark command does")
    f.add_argument("--sentences", required=True)
    f.add_argument("--conf", default=str(REPO / "conf/acl.yaml"))
    f.add_argument("--set", action="append", default=[], help="configuration settings, as for `ratio-spark mine`")
    f.add_argument("--out", required=True)
    c = commands.add_parser("bench", help="baseline (1 and 2 processes) and `ratio-spark mine`, medians, peaks, checks")
    c.add_argument("--sentences", default="/work/data/acl-final/tables/sentences", help="the 1x sentences table")
    c.add_argument("--workdir", required=True)
    c.add_argument("--scales", default="1,4")
    c.add_argument("--lexicons", default="v1,v2,patterns")
    c.add_argument("--processes", default="1,2")
    c.add_argument("--repeats", type=int, default=3)
    c.add_argument("--set", action="append", default=[], help="extra --set for `ratio-spark mine`")
    c.add_argument("--append", action="store_true", help="add to the results file instead of replacing it")
    c.add_argument("--out", default=str(REPO / "benchmarks/results/mining_vs_pandas.json"))
    m = commands.add_parser("compare", help="the tables mine writes, of two table roots, row for row (exit 1: they differ)")
    m.add_argument("before")
    m.add_argument("after")
    args = parser.parse_args()
    if args.command == "compare":
        raise SystemExit(compare(Path(args.before), Path(args.after)))
    if args.command == "prepare":
        prepare(args.sentences, Path(args.workdir), [int(s) for s in args.scales.split(",")])
    elif args.command == "floor":
        print(floor(args.sentences, args.conf, args.set, Path(args.out)))
    elif args.command == "baseline":
        print(json.dumps(baseline(args.sentences, args.lexicon, args.processes, Path(args.out))))
    else:
        bench(args)


if __name__ == "__main__":
    main()
