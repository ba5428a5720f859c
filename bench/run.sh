#!/usr/bin/env bash
# The benchmark in a venv of its own (.venv-bench): Quix Streams pins confluent-kafka < 2.13,
# so all three implementations run there, on the same client library.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test >/dev/null
if [ ! -x .venv-bench/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv-bench
fi
# the worker extra too: runonce's own worker runs here (rocksdict, prometheus-client)
.venv-bench/bin/python -c 'import quixstreams, rocksdict, faust, runonce.streams' 2>/dev/null || \
  .venv/bin/uv pip install -q --python .venv-bench/bin/python -e '.[bench,worker,faust]'
mkdir -p bench/out
exec .venv-bench/bin/python bench/run.py "$@"
