#!/bin/bash
# The ACL fine-tuning runs of docs/training.md ("Results on the ACL corpus"), one at a time, niced, then the
# test-split evaluation and the report. Sized for a shared 2-core CPU (hyperparameter configurations 9, 10 and 8
# of ratio_spark/conf/training/minilm.yaml). Each `evaluate` step scores every model finished so far (the embedding cache
# makes the earlier ones free), so the results folder always holds all finished models.
#
#   benchmarks/training_acl.sh                         # every step: specify evaluate address evaluate broaden
#                                                      #   evaluate unified evaluate report
#   benchmarks/training_acl.sh unified evaluate report # only some steps, in this order
#
# Environment: TABLES (ACL tables root, default /work/data/acl-final/tables), MODELS (run folders, default
# models/acl), RESULTS (evaluate's folder, default models/acl-results), LOGS (default models/acl-logs).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=${PYTHONPATH:-$PWD}
TABLES=${TABLES:-/work/data/acl-final/tables}
M=${MODELS:-models/acl}
R=${RESULTS:-models/acl-results}
L=${LOGS:-models/acl-logs}
mkdir -p "$L"
RS="nice -n 10 ratio-spark"
# GradCache (cached MNRL, 16 texts per pass): plain MNRL at batch 64 peaks at ~5 GiB, too much for the shared machine.
TRAIN="--conf conf/training-acl.yaml --set tables.root=$TABLES --set training.loss=cached_mnrl
       --set training.cached_mini_batch_size=16 --output $M --no-progress"
EVALUATE="--conf conf/training-acl-eval.yaml --set tables.root=$TABLES --no-progress --results $R"

evaluate() {
  local specs="bm25-1,bm25-2,bm25-3,dense:minilm:generic"
  for move in specify address broaden; do
    if [ -d "$M/all-MiniLM-L6-v2-$move-generic/model" ]; then
      specs="$specs,dense:$M/all-MiniLM-L6-v2-$move-generic/model:generic"
    fi
  done
  if [ -d "$M/all-MiniLM-L6-v2-unified-instructions/model" ]; then
    specs="$specs,dense:minilm:instructions,dense:$M/all-MiniLM-L6-v2-unified-instructions/model:instructions"
  fi
  $RS evaluate $EVALUATE --retrievers "$specs"
}

report() {
  local not_run=(--not-run "all-mpnet-base-v2 (generic prefix) Baseline" --not-run "all-mpnet-base-v2 (generic prefix) Tuned")
  if [ ! -d "$M/all-MiniLM-L6-v2-unified-instructions/model" ]; then
    not_run+=(--not-run "all-MiniLM-L6-v2 (per-move instruction) Unified")
  fi
  local runs=()  # finished runs only (a run still training has no training_summary.json yet)
  for run in "$M"/*/; do [ -f "$run/training_summary.json" ] && runs+=("$run"); done
  ratio-spark train report --evaluation "$R" --runs "${runs[@]}" --out benchmarks/results/training-acl "${not_run[@]}"
  mkdir -p benchmarks/results/training-acl/evaluate
  cp "$R"/*.md "$R"/*.csv "$R"/summary.json benchmarks/results/training-acl/evaluate/ 2>/dev/null || true
  rm -f benchmarks/results/training-acl/evaluate/per_query.csv  # 6 MB; it stays in the results folder
  for run in "${runs[@]}"; do
    mkdir -p "benchmarks/results/training-acl/runs/$(basename "$run")"
    cp "$run"/training_summary.json "$run"/curves.csv "benchmarks/results/training-acl/runs/$(basename "$run")/"
  done
}

for step in ${*:-specify evaluate address evaluate broaden evaluate unified evaluate report}; do
  echo "== $step $(date -u +%T) $(uptime)" | tee -a "$L/steps.txt"
  case $step in
    specify) $RS train $TRAIN --moves specify --configurations 9 --eval-steps 10 > "$L/specify.log" 2>&1 ;;
    address) $RS train $TRAIN --moves address --configurations 10 > "$L/address.log" 2>&1 ;;
    broaden) $RS train $TRAIN --moves broaden --configurations 10 > "$L/broaden.log" 2>&1 ;;
    unified) $RS train $TRAIN --mode unified --prefix instructions --configurations 8 --eval-steps 14 \
               > "$L/unified.log" 2>&1 ;;
    evaluate) evaluate > "$L/evaluate-$(date -u +%H%M%S).log" 2>&1 ;;
    report) report ;;
    *) echo "unknown step $step (specify address broaden unified evaluate report)" >&2; exit 2 ;;
  esac
  echo "== end $step $(date -u +%T) $(uptime)" | tee -a "$L/steps.txt"
done
