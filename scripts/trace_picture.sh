#!/usr/bin/env bash
# The docs' picture of one action's trace (docs/img/trace-held-email.png): the Jaeger test run
# on this machine keeping Jaeger's answers, then the held email's trace drawn from its answer.
#   bash scripts/trace_picture.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/img/trace-held-email.png}
keep=$(mktemp -d)
trap 'rm -rf "$keep"' EXIT
RUNONCE_TRACES_OUT="$keep" .venv/bin/pytest -q -p no:cacheprovider tests/integration/test_traces.py
.venv/bin/python scripts/trace_picture.py "$keep/held-email.json" "$out"
