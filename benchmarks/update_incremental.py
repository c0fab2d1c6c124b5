"""`ratio-spark update` on the ACL corpus: about a month of papers added to the rest, wall time per stage.

The ACL corpus (2014-2018) dates papers by year only, so "a month" is a twelfth of the 2018 papers: the 84
largest 2018 paper ids. ``prepare`` builds the base once: the ACL-FINAL ``papers`` (with an empty
``bibliography``: that table predates references), ``rejects`` and ``sentences`` without the held-out papers,
then mine, citations, pools and export over them; and it extracts the held-out TEI files from the corpus
archive into ``<root>/new``. ``run`` copies the base and runs ``update`` with the held-out files, with the code
on ``PYTHONPATH`` (this tree: incremental; a checkout of main before it: every derived table rebuilt), and
writes the summary's seconds per stage. ``compare`` checks that two runs left the same tables, row for row.

    python benchmarks/update_incremental.py prepare --root /work/data/incremental
    PYTHONPATH=$PWD python benchmarks/update_incremental.py run --root /work/data/incremental --label incremental
    git archive 584ee7f | tar -x -C /tmp/update-before   # main before the incremental update
    PYTHONPATH=/tmp/update-before python benchmarks/update_incremental.py run --root /work/data/incremental \\
        --label whole-tables
    python benchmarks/update_incremental.py compare --root /work/data/incremental incremental whole-tables
"""

from __future__ import annotations

import argparse
import json
import shutil
import tarfile
import time
from pathlib import Path

from ratio_spark.core.provenance import shared_folder

REPO = Path(__file__).resolve().parents[1]
SOURCE = Path("/work/data/acl-final/tables")
ARCHIVE = shared_folder() / "corpora" / "acl-emnlp-2014-2018-grobid-tei.tar.gz"
HELD_OUT_YEAR, HELD_OUT = 2018, 84


def config_for(tables: Path):
    from ratio_spark.config import load_config

    return load_config(REPO / "conf" / "acl.yaml", [f"tables.root={tables}", f"release.root={tables.parent / 'release'}"])


def prepare(root: Path) -> None:
    from pyspark.sql import functions as F

    from ratio_spark.core.schema import BIBLIOGRAPHY_TYPE, TABLES
    from ratio_spark.pipeline.session import build_spark_session
    from ratio_spark.pipeline.runner import run_stage

    config = config_for(root / "base" / "tables")
    spark = build_spark_session(config.spark)
    papers = spark.read.format("delta").load(str(SOURCE / "papers"))
    if "bibliography" not in papers.columns:
        papers = papers.withColumn("bibliography", F.lit(None).cast(BIBLIOGRAPHY_TYPE))
    held = papers.filter(F.year("pub_date") == HELD_OUT_YEAR).select("paper_id", "source_path") \
        .orderBy(F.desc("paper_id")).limit(HELD_OUT).collect()
    held_ids = [r["paper_id"] for r in held]
    for name, frame in (("papers", papers.select(*TABLES["papers"].column_names)),
                        ("sentences", spark.read.format("delta").load(str(SOURCE / "sentences"))),
                        ("rejects", spark.read.format("delta").load(str(SOURCE / "rejects")))):
        if name != "rejects":
            frame = frame.filter(~F.col("paper_id").isin(*held_ids))
        frame.write.format("delta").mode("overwrite").save(config.tables.location(name))
    seconds = {}
    for stage in ("mine", "citations", "pools", "export"):
        started = time.time()
        run_stage(spark, config, stage)
        seconds[stage] = round(time.time() - started, 1)
    spark.stop()
    members = {r["source_path"].split("!", 1)[1] for r in held}
    new = root / "new"
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir(parents=True)
    with tarfile.open(ARCHIVE) as archive:
        for member in archive:
            if member.name in members:
                (new / Path(member.name).name).write_bytes(archive.extractfile(member).read())
    assert len(list(new.iterdir())) == len(held_ids), "not every held-out paper was found in the archive"
    (root / "base.json").write_text(json.dumps({"held_out": held_ids, "base_stage_seconds": seconds}, indent=2))
    print(json.dumps({"held_out": len(held_ids), "base_stage_seconds": seconds}))


def run(root: Path, label: str) -> None:
    from ratio_spark.pipeline.session import build_spark_session
    from ratio_spark.pipeline.update import update

    work = root / f"run-{label}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(root / "base", work)
    config = config_for(work / "tables")
    spark = build_spark_session(config.spark)
    started = time.time()
    summary = update(spark, config, str(root / "new"))
    wall = round(time.time() - started, 1)
    spark.stop()
    result = {"label": label, "wall_seconds": wall, "papers": summary["papers"],
              "stage_seconds": {s: v["seconds"] for s, v in summary["stages"].items()},
              "mine_phase_seconds": summary["stages"]["mine"].get("phase_seconds"),
              "pools_phase_seconds": summary["stages"]["pools"].get("phase_seconds"),
              "splits_rebuilt": summary.get("splits_rebuilt"), "mined": {
                  k: summary["stages"]["mine"].get(k) for k in ("papers_mined", "papers_sharing_a_text", "mined_pairs")}}
    (root / f"run-{label}.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


def compare(root: Path, labels: list[str]) -> None:
    """Every table of the two runs (but ``releases``: its times differ), as sorted rows of strings."""
    from deltalake import DeltaTable

    first, second = (root / f"run-{label}" / "tables" for label in labels)
    names = sorted(p.name for p in first.iterdir() if (p / "_delta_log").is_dir() and p.name != "releases")
    assert names == sorted(p.name for p in second.iterdir() if (p / "_delta_log").is_dir() and p.name != "releases")
    for name in names:
        rows = [sorted(map(str, DeltaTable(str(t / name)).to_pandas().astype(str).itertuples(index=False)))
                for t in (first, second)]
        print(f"{name}: {len(rows[0])} rows, {'same' if rows[0] == rows[1] else 'DIFFERENT'}", flush=True)
        assert rows[0] == rows[1], name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("prepare", "run", "compare"))
    parser.add_argument("labels", nargs="*", help="compare: the two runs' labels")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--label", default="incremental")
    args = parser.parse_intermixed_args()
    if args.step == "prepare":
        prepare(args.root)
    elif args.step == "run":
        run(args.root, args.label)
    else:
        compare(args.root, args.labels)


if __name__ == "__main__":
    main()
