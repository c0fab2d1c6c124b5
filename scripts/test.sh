#!/usr/bin/env bash
# The test command: set up, then run the whole test suite (slow tests included) with real Spark.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$PWD/${RATIO_VENV:-.venv}/bin/python"
# Two workers (pytest-xdist), one test module at a time each: a module's fixtures stay in one worker.
# The 30 slowest tests close the output: where the suite's time goes, in every CI log.
workers=${RATIO_TEST_WORKERS:-2}
case "$workers" in
  ''|*[!0-9]*) echo "scripts/test.sh: RATIO_TEST_WORKERS must be a whole number of test processes, not '$workers'" >&2; exit 2 ;;
esac
if [ "$workers" -gt 1 ]; then
  exec "${RATIO_VENV:-.venv}/bin/pytest" -q --durations=30 -n "$workers" --dist loadfile "$@"
fi
exec "${RATIO_VENV:-.venv}/bin/pytest" -q --durations=30 "$@"
