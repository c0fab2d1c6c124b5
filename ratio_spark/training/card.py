"""What a training run leaves on disk: the selected model with its card, and the run's summary and curves.

```
<output>/<run>/
  model/                     the selected configuration's restored best checkpoint: a sentence-transformers
    README.md                folder (loads with SentenceTransformer(path) and `evaluate --retrievers
    ratio_training.json      dense:<path>:<prefix>`); README.md is sentence-transformers' card plus our
                             section; ratio_training.json the same facts for programs
  training_summary.json      every configuration: hyperparameters, validation curve, losses, timings
  curves.csv, curves.png     validation metrics per configuration and step (step 0: the untuned model)
  configurations/<id>/       checkpoints and non-selected models, only with keep_checkpoints
```
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ratio_spark.core.markdown import markdown_table
from ratio_spark.training.evaluator import PRIMARY


def code_version() -> str:
    """The git commit of this code (with ``-dirty`` when the tree has changes), or ``unknown``."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def model_card(run) -> dict:
    """The facts a user of the model needs: what it was trained from, on what, how, and how well."""
    best = run.best
    return {
        "base_model": run.base_model,
        "base_model_path": run.base_model_path,
        "mode": run.mode,
        "moves": run.moves,
        "prefix": run.prefix,
        "prompts": run.prompts,
        "evaluate_with": run.evaluate_spec,
        "data": run.data,
        "training_pairs": run.counts,
        "loss": run.settings["loss"],
        "batch_sampler": "no_duplicates",
        "hyperparameters": best.hyperparameters,
        "hyperparameter_file": run.settings["hyperparameters"],
        "configurations_tried": [c.id for c in run.configurations],
        "selected_by": f"validation {PRIMARY} against the validation split's whole pool",
        "validation_mrr10": best.best_mrr10,
        "validation_mrr10_untuned": run.baseline.get(PRIMARY),
        "best_step": best.best_step,
        "best_epoch": best.best_epoch,
        "validation_curve": best.curve,
        "wall_seconds": run.wall_seconds,
        "train_pairs_per_second": best.pairs_per_second,
        "processes": run.world_size,
        "hardware": run.hardware,
        "code": code_version(),
    }


def card_markdown(card: dict) -> str:
    hp = card["hyperparameters"]
    curve = markdown_table(["epoch", "step", "validation MRR@10 (%)"],
                           [[f"{p['epoch']:.2f}", p["step"], f"{100 * p[PRIMARY]:.2f}"] for p in card["validation_curve"]])
    untuned = card["validation_mrr10_untuned"]
    return f"""
## Ratio fine-tuning (ratio-spark train)

- Base model: `{card['base_model']}`; moves: {', '.join(card['moves'])} ({card['mode']}); prefix mode `{card['prefix']}`
- Evaluate with: `ratio-spark evaluate --retrievers {card['evaluate_with']}`
- Data: {json.dumps(card['data'])}
- Loss: {card['loss']} (in-batch negatives), batch sampler without duplicate texts
- Hyperparameters (configuration {hp['id']} of {card['configurations_tried']} in `{card['hyperparameter_file']}`):
  epochs {hp['epochs']}, batch size per device {hp['batch_size']}, learning rate {hp['learning_rate']}, weight decay
  {hp['weight_decay']}, warmup ratio {hp['warmup_ratio']}, max grad norm {hp['max_grad_norm']}, freeze ratio
  {hp['freeze_ratio']}, max sequence length {hp['max_seq_length']}, seed {hp['seed']}
- Selected by {card['selected_by']}: {100 * card['validation_mrr10']:.2f} at step {card['best_step']}
  (untuned: {'–' if untuned is None else f'{100 * untuned:.2f}'})
- Wall time {card['wall_seconds']} s on {card['processes']} process(es), {card['train_pairs_per_second']} training
  pairs/s; hardware: {json.dumps(card['hardware'])}; code {card['code']}

{curve}
"""


def write_run(run, keep_all: bool = False) -> None:
    """Move the selected model to ``<run>/model``, write its card, the summary and the curves."""
    from ratio_spark.training.reports import curves_frame, plot_curves

    out = Path(run.output_dir)
    target = out / "model"
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(out / "configurations" / run.selected / "model"), str(target))
    if not keep_all:
        shutil.rmtree(out / "configurations", ignore_errors=True)
    card = model_card(run)
    (target / "ratio_training.json").write_text(json.dumps(card, indent=2, default=str) + "\n")
    readme = target / "README.md"
    readme.write_text((readme.read_text() if readme.exists() else "") + card_markdown(card))
    (out / "training_summary.json").write_text(json.dumps(run.to_dict(), indent=2, default=str) + "\n")
    curves_frame([run.to_dict()]).to_csv(out / "curves.csv", index=False)
    plot_curves([run.to_dict()], out / "curves.png")
