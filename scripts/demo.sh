#!/usr/bin/env bash
# The main command: set up, then run the whole pipeline on the bundled sample (data/sample).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$PWD/${RATIO_VENV:-.venv}/bin/python"
exec "${RATIO_VENV:-.venv}/bin/ratio-spark" run --conf conf/sample.yaml --summary-json data/tables/sample/summary.json "$@"
