#!/usr/bin/env bash
# The benchmark in a venv of its own (.venv-bench): Quix Streams pins confluent-kafka < 2.13,
# so all three implementations run there, on the same client library.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
if [ ! -x .venv-bench/bin/python ]; then
  python3 -m venv .venv-bench
fi
.venv-bench/bin/python -c 'import quixstreams, runonce.streams' 2>/dev/null || \
  .venv-bench/bin/python -m pip install -q -e '.[bench]'
mkdir -p bench/out
exec .venv-bench/bin/python bench/run.py "$@"
