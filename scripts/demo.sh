#!/usr/bin/env bash
# The main command: set up, run the whole pipeline on the bundled sample (data/sample), then score retrievers on it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the demo runs: the pipeline and the evaluation (the eval extra). The test command's setup adds the
# dev extra, whose local LLM server (llama.cpp) takes minutes to build.
RATIO_EXTRAS="${RATIO_EXTRAS:-eval}" scripts/setup.sh
export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$PWD/${RATIO_VENV:-.venv}/bin/python"
"${RATIO_VENV:-.venv}/bin/ratio-spark" run --conf conf/sample.yaml --summary-json data/tables/sample/summary.json "$@"
# Then score BM25 (three variants) and a dense model (all-MiniLM-L6-v2) on the sample's test split (docs/evaluation.md).
exec "${RATIO_VENV:-.venv}/bin/ratio-spark" evaluate --conf conf/sample.yaml --split test \
  --retrievers bm25-1,bm25-2,bm25-3,dense:minilm --results results/sample
