"""The training stage (issue 14): real MiniLM, real sentence-transformers trainer, tiny slices of the sample.

One trained model is shared by the module (``trained_run``): 233 train pairs, one epoch, validated every 5 steps
against the fixture's whole validation pool. It is trained on a tables root whose test partition is
unreadable, which is how we prove that ``train`` never opens the test split.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES, REPO_ROOT
from ratio_spark.cli.main import main

FIXTURE = FIXTURES / "training"
TINY_HYPERPARAMETERS = """\
configurations:
  - {id: tiny, epochs: 1, batch_size: 16, learning_rate: 1.0e-4, warmup_ratio: 0.1, max_seq_length: 48, seed: 7}
"""


def poison_test_partition(root: Path) -> int:
    """Overwrite every data file of the test split with bytes that no reader accepts; returns the count."""
    files = [p for name in ("queries", "candidates") for p in (root / name / "split=test").glob("*.parquet")]
    for path in files:
        path.write_bytes(b"not parquet: the test split must not be read by train")
    return len(files)


@pytest.fixture(scope="module")
def hyperparameter_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hp") / "tiny.yaml"
    path.write_text(TINY_HYPERPARAMETERS)
    return path


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, training_tables, hyperparameter_file):
    """``ratio-spark train`` on Specify, on a copy of the tables whose test partition is poisoned."""
    from ratio_spark.evaluation.data import load_split

    root = tmp_path_factory.mktemp("poisoned")
    for name in ("queries", "candidates"):
        shutil.copytree(training_tables / name, root / name)
    poisoned = poison_test_partition(root)
    with pytest.raises(Exception):  # the trap works: reading the test split fails
        load_split(root, "test")
    output = tmp_path_factory.mktemp("models")
    summary = output / "summary.json"
    code = main(["train", "--source", str(root), "--moves", "specify", "--hyperparameters", str(hyperparameter_file),
                 "--output", str(output), "--eval-steps", "5", "--no-progress", "--summary-json", str(summary),
                 "--set", f"evaluation.cache_dir={tmp_path_factory.mktemp('embeddings')}"])
    return {"code": code, "runs": json.loads(summary.read_text()) if summary.exists() else [], "poisoned": poisoned,
            "output": output, "root": root}


def fixture_rows(name: str, split: str) -> list[dict]:
    rows = [json.loads(line) for line in (FIXTURE / f"{name}.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r["split"] == split]


# ------------------------------------------------------------------------------------------------ settings


def test_the_default_hyperparameters_load_from_any_working_directory(tmp_path, monkeypatch):
    """The default names a file shipped in the package, not one of the checkout: an installed package run from
    elsewhere finds it; a path is read from the working directory, before a shipped file of the same name."""
    from ratio_spark.training.hyperparameters import load_hyperparameters
    from ratio_spark.training.settings import TrainingConfig

    monkeypatch.chdir(tmp_path)
    default = TrainingConfig().hyperparameters
    assert [c.id for c in load_hyperparameters(default)] == [c.id for c in load_hyperparameters("minilm.yaml")]
    assert load_hyperparameters("mpnet")[0].rationale
    (tmp_path / "minilm.yaml").write_text("configurations:\n  - {id: mine, epochs: 2}\n")
    assert [(c.id, c.epochs) for c in load_hyperparameters("minilm.yaml")] == [("mine", 2)]


def test_training_settings_are_validated(tmp_path):
    from ratio_spark.config import load_config
    from ratio_spark.core.config import ConfigError
    from ratio_spark.training.hyperparameters import load_hyperparameters
    from ratio_spark.training.settings import TrainingInputError

    assert load_config(None, ["training.moves=[address]"]).training.moves == ["address"]
    with pytest.raises(ConfigError, match="training.learning_rate"):
        load_config(None, ["training.learning_rate=1e-5"])  # hyperparameters live in the files, not here
    with pytest.raises(ConfigError, match="unified needs prefix instructions"):
        load_config(None, ["training.mode=unified"])
    for path in sorted(Path("ratio_spark/conf/training").glob("*.yaml")):  # the shipped files parse
        configurations = load_hyperparameters(path)
        assert configurations and all(c.rationale for c in configurations)
    with pytest.raises(TrainingInputError, match="no configuration"):
        load_hyperparameters("minilm", ["99"])
    with pytest.raises(TrainingInputError, match="not found: nope.yaml .*shipped one: minilm, mpnet"):
        load_hyperparameters("nope.yaml")
    with pytest.raises(TrainingInputError, match="is a folder, not a hyperparameter file .*shipped one: minilm"):
        load_hyperparameters(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("configurations:\n  - {id: 1, learning_rate: -1}\n")
    with pytest.raises(TrainingInputError, match="configurations.0.learning_rate"):
        load_hyperparameters(bad)


def test_user_errors_are_one_line_and_exit_2(training_tables, tmp_path, capsys):
    """Bad input reaches the user through the CLI's one handler: exit code 2, one line, no trace."""
    cases = {
        "no configuration": ["train", "--source", str(training_tables), "--configurations", "99",
                             "--output", str(tmp_path / "models")],
        "invalid configuration: training.moves": ["train", "--source", str(training_tables), "--set", "training.moves=[]"],
        "invalid training settings: training.moves": ["train", "--source", str(training_tables), "--moves", ","],
        "not a results folder": ["train", "report", "--evaluation", str(tmp_path), "--runs", str(tmp_path)],
        "MODEL=SPEC": ["train", "report", "--evaluation", str(tmp_path), "--runs", str(tmp_path),
                       "--baseline", "minilm"],
    }
    for expected, argv in cases.items():
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err, (argv, err)
        assert len([line for line in err.splitlines() if line.strip()]) == 1, err
    assert not (tmp_path / "models").exists()  # nothing trained or written


# ------------------------------------------------------------------------------------------------ data


def test_training_pairs_and_hard_negatives(training_tables):
    from ratio_spark.evaluation.data import load_split
    from ratio_spark.evaluation.retrieval.bm25 import BM25Retriever
    from ratio_spark.training.data import add_hard_negatives, training_pairs

    train = load_split(training_tables, "train", ["specify"])
    with pytest.raises(ValueError, match="train split"):
        training_pairs(load_split(training_tables, "validation", ["specify"]), "specify")
    pairs = training_pairs(train, "specify")
    candidates = {r["candidate_id"]: r for r in fixture_rows("candidates", "train")}
    expected = {r["query_text"]: candidates[r["gold_candidate_id"]]["text"]
                for r in fixture_rows("queries", "train") if r["move"] == "specify"}
    assert dict(zip(pairs.query_texts, pairs.gold_texts)) == expected
    sampled = training_pairs(train, "specify", max_pairs=50, seed=3)
    assert len(sampled) == 50 and sampled.counts["sampled_out"] == len(expected) - 50

    mined = add_hard_negatives(pairs, train, BM25Retriever(progress=False), count=2, skip_top=1)
    assert len(mined) + mined.counts["dropped_without_enough_negatives"] == len(pairs)
    assert len(mined) > 0 and len(mined.negatives) == 2
    paper_of_text = {}
    for row in candidates.values():
        paper_of_text.setdefault(row["text"], set()).add(row["paper_id"])
    for query, gold, negatives in zip(mined.queries, mined.gold_texts, zip(*mined.negatives)):
        for negative in negatives:
            assert negative != gold
            assert query.paper_id not in paper_of_text[negative]
        assert len(set(negatives)) == 2
    assert list(mined.columns()) == ["query", "gold", "negative_1", "negative_2"]


# ------------------------------------------------------------------------------------------------ the sampler


def test_no_batch_holds_a_text_twice(training_tables, hyperparameter_file, tmp_path):
    """The trainer's own dataloader, on real pairs plus deliberate duplicates; the default sampler would
    put duplicates together on the same data, so this check can fail."""
    from sentence_transformers.base.sampler import BatchSamplers

    from ratio_spark.evaluation.data import load_split
    from ratio_spark.training.data import TrainingPairs, training_pairs
    from ratio_spark.training.evaluator import ValidationEvaluator
    from ratio_spark.training.hyperparameters import load_hyperparameters
    from ratio_spark.training.settings import TrainingConfig
    from ratio_spark.training.trainer import build_trainer

    pairs = training_pairs(load_split(training_tables, "train", ["specify"]), "specify")
    shared_gold, shared_query = pairs.gold_texts[0], pairs.query_texts[1]
    n = len(pairs)
    noisy = TrainingPairs(
        move="specify", queries=pairs.queries,
        query_texts=[q if i % 3 else shared_query for i, q in enumerate(pairs.query_texts)],
        gold_texts=[g if i % 2 else shared_gold for i, g in enumerate(pairs.gold_texts)],
    )
    settings = TrainingConfig(moves=["specify"], progress=False)
    hp = load_hyperparameters(hyperparameter_file)[0]
    evaluator = ValidationEvaluator(load_split(training_tables, "validation", ["specify"]), "minilm", "generic")
    trainer = build_trainer(settings, hp, {"specify": noisy}, evaluator, {"specify": ("query: ", "document: ")},
                            tmp_path)

    def batches(loader_trainer) -> list[list[int]]:
        return [list(batch) for batch in loader_trainer.get_train_dataloader().batch_sampler]

    def texts(i: int) -> list[str]:
        return [noisy.query_texts[i], noisy.gold_texts[i]]

    ours = batches(trainer)
    assert sorted(i for batch in ours for i in batch) == list(range(n))  # every pair once per epoch
    for batch in ours:
        seen = [t for i in batch for t in texts(i)]
        assert len(seen) == len(set(seen)), "a batch holds the same text twice"
    trainer.args.batch_sampler = BatchSamplers.BATCH_SAMPLER
    default = batches(trainer)
    assert any(len({t for i in b for t in texts(i)}) < 2 * len(b) for b in default), \
        "the default sampler should have mixed duplicates here (otherwise this test proves nothing)"
    assert sum(len(b) for b in default) == n


def test_a_run_of_one_step_learns(training_tables, hyperparameter_file, tmp_path):
    """Broaden on ACL has 26 training pairs: one batch. The trainer's own schedule must give that one step a
    learning rate above 0 (a warm-up ratio rounded up made it all warm-up, and the model did not change),
    while a longer run still warms up over its first tenth."""
    from ratio_spark.evaluation.data import load_split
    from ratio_spark.training.data import training_pairs
    from ratio_spark.training.evaluator import ValidationEvaluator
    from ratio_spark.training.hyperparameters import load_hyperparameters
    from ratio_spark.training.settings import TrainingConfig
    from ratio_spark.training.trainer import build_trainer

    pairs = training_pairs(load_split(training_tables, "train", ["specify"]), "specify")
    evaluator = ValidationEvaluator(load_split(training_tables, "validation", ["specify"]), "minilm", "generic")
    hp = load_hyperparameters(hyperparameter_file)[0]
    assert hp.warmup_ratio > 0

    def first_learning_rates(batch_size: int, steps: int) -> list[float]:
        one = hp.model_copy(update={"batch_size": batch_size, "epochs": 1})
        trainer = build_trainer(TrainingConfig(moves=["specify"], progress=False), one, {"specify": pairs},
                                evaluator, {"specify": ("query: ", "document: ")}, tmp_path)
        trainer.create_optimizer_and_scheduler(num_training_steps=steps)
        rates = []
        for _ in range(min(steps, 2)):
            rates.append(trainer.lr_scheduler.get_last_lr()[0])
            trainer.optimizer.step()
            trainer.lr_scheduler.step()
        return rates

    assert first_learning_rates(len(pairs), 1)[0] > 0  # the whole run is one batch
    steps = -(-len(pairs) // 4)
    assert steps >= 20 and first_learning_rates(4, steps)[0] == 0  # warm-up: the first step at 0, then it rises


# ------------------------------------------------------------------------------------------------ one run


def test_train_never_opens_the_test_split(trained_run):
    assert trained_run["poisoned"] >= 2
    assert trained_run["code"] == 0


def test_tiny_run_changes_the_model_and_restores_the_best_checkpoint(trained_run, training_tables):
    from sentence_transformers import SentenceTransformer

    from ratio_spark.evaluation.data import load_split
    from ratio_spark.evaluation.models import load_sentence_transformer
    from ratio_spark.training.evaluator import ValidationEvaluator

    run = trained_run["runs"][0]
    model_dir = Path(run["model_dir"])
    assert run["moves"] == ["specify"] and run["world_size"] == 1
    assert run["counts"]["specify"]["train_pairs"] == sum(1 for r in fixture_rows("queries", "train")
                                                             if r["move"] == "specify")
    tuned = SentenceTransformer(str(model_dir), device="cpu")
    base = load_sentence_transformer("minilm", "cpu")
    texts = [r["query_text"] for r in fixture_rows("queries", "validation")[:8]]
    cosines = np.sum(tuned.encode(texts, normalize_embeddings=True) * base.encode(texts, normalize_embeddings=True), 1)
    assert cosines.min() < 0.999, "training left the embeddings unchanged"

    best = next(c for c in run["configurations"] if c["id"] == run["selected"])
    curve = best["curve"]
    assert [p["step"] for p in curve] == sorted({5, 10, best["steps"]})  # every 5 steps and at the epoch end
    top = max(curve, key=lambda p: p["mrr@10"])
    assert best["best_step"] == top["step"] and math.isclose(best["best_mrr10"], top["mrr@10"], abs_tol=1e-9)
    # the saved folder is the restored best checkpoint: it scores what the curve says the best step scored
    evaluator = ValidationEvaluator(load_split(training_tables, "validation", ["specify"]), run["base_model_path"],
                                    "generic")
    assert math.isclose(evaluator.score(tuned)["mrr@10"], top["mrr@10"], abs_tol=1e-6)
    assert math.isclose(evaluator.score(base)["mrr@10"], run["baseline"]["mrr@10"], abs_tol=1e-6)

    card = json.loads((model_dir / "ratio_training.json").read_text())
    assert card["base_model"] == "minilm" and card["prefix"] == "generic" and card["moves"] == ["specify"]
    assert card["data"]["kind"] == "delta" and set(card["data"]["versions"]) == {"queries", "candidates"}
    assert card["hyperparameters"]["id"] == "tiny" and card["validation_curve"] == curve
    assert card["wall_seconds"] > 0 and card["hardware"]["cpu_count"] and card["train_pairs_per_second"] > 0
    assert "Ratio fine-tuning" in (model_dir / "README.md").read_text()
    assert tuned.prompts["query"] == "query: " and tuned.prompts["document"] == "document: "
    out = Path(run["output_dir"])
    assert (out / "curves.png").stat().st_size > 0 and (out / "training_summary.json").is_file()
    assert not (out / "configurations").exists()  # checkpoints removed


def test_evaluate_scores_the_saved_model(trained_run, training_tables, tmp_path):
    import pandas as pd

    run = trained_run["runs"][0]
    spec = run["evaluate_spec"]
    results = tmp_path / "results"
    code = main(["evaluate", "--source", str(training_tables), "--split", "test", "--retrievers",
                 f"bm25-1,dense:minilm:generic,{spec}", "--analyses", "none", "--no-cache", "--no-progress",
                 "--results", str(results)])
    assert code == 0
    metrics = pd.read_csv(results / "metrics.csv")
    tuned = metrics[(metrics["system"] == spec) & (metrics["metric"] == "M@10")]
    assert set(tuned["move"]) == {"address", "broaden", "specify"}
    tests = fixture_rows("queries", "test")
    assert tuned.set_index("move")["queries"].to_dict() == {m: sum(1 for r in tests if r["move"] == m)
                                                             for m in ("address", "broaden", "specify")}

    # the report: the Tuned row of Specify is the tuned system's value, the Baseline row the untuned one's
    report = tmp_path / "report"
    assert main(["train", "report", "--evaluation", str(results), "--runs", run["output_dir"], "--out", str(report),
                 "--not-run", "all-mpnet-base-v2 (generic prefix) Tuned"]) == 0
    written = {name: report / name for name in ("training_results.csv", "transfer.csv", "training_results.md")}
    rows = pd.read_csv(written["training_results.csv"])
    value = lambda system, move: 100 * metrics[(metrics["system"] == system) & (metrics["move"] == move)
                                               & (metrics["metric"] == "M@10")]["value"].iloc[0]
    pick = lambda kind, move: rows[(rows["kind"] == kind) & (rows["move"] == move) & (rows["metric"] == "M@10")]
    assert math.isclose(pick("tuned", "specify")["value"].iloc[0], value(spec, "specify"), abs_tol=0.01)
    assert pick("tuned", "address")["value"].isna().all()  # no Address model was trained
    assert math.isclose(pick("baseline", "specify")["value"].iloc[0], value("dense:minilm:generic", "specify"),
                        abs_tol=0.01)
    transfer = pd.read_csv(written["transfer.csv"])
    on_address = transfer[(transfer["trained_on"] == "trained on specify") & (transfer["move"] == "address")].iloc[0]
    expected = (value(spec, "address") / value("dense:minilm:generic", "address") - 1) * 100
    assert math.isclose(on_address["change_percent"], expected, abs_tol=0.05)
    text = Path(written["training_results.md"]).read_text()
    assert "Cross-move transfer" in text and "| all-mpnet-base-v2 (generic prefix) Tuned | – |" in text
    assert (report / "curves.png").stat().st_size > 0


# ------------------------------------------------------------------------------------------------ scale-out


def _distributed_env() -> dict:
    import os
    import sys

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env["OMP_NUM_THREADS"] = "1"  # two processes on two cores
    return env


@pytest.mark.slow
def test_unified_model_under_torchrun_with_two_cpu_processes(training_tables, hyperparameter_file, tmp_path):
    """torchrun, 2 processes, gloo: one model for two moves, each query with its move's instruction."""
    import subprocess
    import sys

    summary = tmp_path / "summary.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "ratio_spark.cli.main", "train", "--source", str(training_tables), "--mode", "unified",
               "--prefix", "instructions", "--moves", "address,specify", "--hyperparameters", str(hyperparameter_file),
               "--max-train-pairs", "48", "--output", str(tmp_path / "models"), "--no-progress",
               "--summary-json", str(summary), "--set", f"evaluation.cache_dir={tmp_path / 'embeddings'}"]
    done = subprocess.run(command, capture_output=True, text=True, env=_distributed_env(), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run, = json.loads(summary.read_text())
    assert run["world_size"] == 2 and run["mode"] == "unified" and run["moves"] == ["address", "specify"]
    assert run["counts"]["address"]["train_pairs"] == 31 and run["counts"]["specify"]["train_pairs"] == 48
    point = run["configurations"][0]["curve"][-1]
    assert math.isclose(point["mrr@10"], (point["address_mrr@10"] + point["specify_mrr@10"]) / 2, abs_tol=1e-9)
    from ratio_spark.evaluation.retrieval.dense import MOVE_INSTRUCTIONS

    prompts = json.loads((Path(run["model_dir"]) / "config_sentence_transformers.json").read_text())["prompts"]
    assert MOVE_INSTRUCTIONS["address"] in prompts["address"] and MOVE_INSTRUCTIONS["specify"] in prompts["specify"]
    assert run["evaluate_spec"].endswith(":instructions")


@pytest.mark.slow
def test_torch_distributor_local_mode_with_two_processes(training_tables, hyperparameter_file, tmp_path, monkeypatch):
    """PySpark's TorchDistributor (local mode, 2 CPU processes) runs ``ratio-spark train``: here on Specify
    with cached MNRL and BM25-mined hard negatives."""
    for key, value in _distributed_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    output = tmp_path / "models"
    code = main(["train", "--source", str(training_tables), "--moves", "specify", "--hyperparameters",
                 str(hyperparameter_file), "--max-train-pairs", "64", "--loss", "cached_mnrl", "--hard-negatives",
                 "--output", str(output), "--launcher", "torch_distributor", "--num-processes", "2", "--no-progress",
                 "--set", f"evaluation.cache_dir={tmp_path / 'embeddings'}"])
    assert code == 0
    run = json.loads((output / "all-MiniLM-L6-v2-specify-generic" / "training_summary.json").read_text())
    assert run["world_size"] == 2 and run["settings"]["loss"] == "cached_mnrl"
    counts = run["counts"]["specify"]
    assert counts["hard_negatives_per_pair"] == 1
    assert counts["train_pairs"] + counts["dropped_without_enough_negatives"] == 64
    assert (Path(run["model_dir"]) / "model.safetensors").is_file()
    assert not list(output.glob(".train-launch-*.yaml"))  # the launch configuration is cleaned up
