#!/usr/bin/env bash
# Set up, then run every test. The test session starts one Kafka broker of its own
# (free ports, a temporary folder) and stops it at the end, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== mypy (pure core) =="
.venv/bin/mypy
echo "== pytest =="
exec .venv/bin/pytest "$@"
