#!/usr/bin/env bash
# Set up, then run every test. Each pytest session starts one Kafka broker of its own
# (free ports, a temporary folder) and stops it at the end, whatever happens: first the
# main suite on a plaintext broker, then tests/security on a SASL + ACL broker; last, the
# wheel as the Docker image installs it (scripts/wheel_check.sh: its own broker, for the demo).
# The main suite runs on two pytest-xdist workers, each with a broker of its own: most of its
# time is waiting on brokers and subprocesses, so two side by side take ~13 min where one took
# ~21 (a module's tests stay together, in order; tests/conftest.py says what takes a machine-wide lock).
set -euo pipefail
cd "$(dirname "$0")/.."
phase() { echo "== $* ($(( SECONDS / 60 ))m$(( SECONDS % 60 ))s in) =="; }
bash scripts/setup.sh --test
phase "mypy --strict (the whole package)"
.venv/bin/mypy
phase "ruff: import order, unused imports, no reaching into another object's privates"
.venv/bin/ruff check .
phase "import-linter: each layer imports only the layers below it"
.venv/bin/lint-imports
phase "mkdocs build --strict: the docs build, and a broken link fails"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
phase "pytest: main suite (plaintext broker)"
.venv/bin/pytest --ignore=tests/security -n "${RUNONCE_TEST_WORKERS:-2}" --dist loadscope "$@"
# Beside the security suite and the bench, whose time is mostly waiting on brokers: each
# extra's clean venv (installs and imports, no broker) and the chart's validation by a real
# API server (scripts/kube.sh; no broker either). Each one's output is shown, and its status
# counted, at its own phase below.
extras_log=$(mktemp) validate_log=$(mktemp)
bash scripts/extras_check.sh > "$extras_log" 2>&1 &
extras_pid=$!
bash scripts/cluster.sh --validate > "$validate_log" 2>&1 &
validate_pid=$!
trap 'kill "$extras_pid" "$validate_pid" 2>/dev/null || true; rm -f "$extras_log" "$validate_log"' EXIT
shown() {  # NAME PID LOG: what a job beside the phases said, and its status
  local status=0
  wait "$2" || status=$?
  cat "$3"
  [ "$status" = 0 ] || { echo "$1 failed (exit $status)"; exit "$status"; }
}
phase "pytest: security suite (SASL_SSL + SCRAM, mTLS, OIDC, StandardAuthorizer broker)"
.venv/bin/pytest tests/security -n "${RUNONCE_TEST_WORKERS:-2}" --dist loadscope "$@"
phase "bench/run.sh small (2,000 actions, throughput only, every implementation): the documented benchmark runs on a clean clone"
bash bench/run.sh --actions 2000 --latency-seconds 0 --out "$(mktemp -d)/RESULTS.md"
phase "the wheel, installed non-editable in a clean venv: imports, runonce demo"
bash scripts/wheel_check.sh
phase "each agent-facing extra alone in a clean venv: its imports, the user's own pytest, the replay test as docs/connectors.md writes it (run beside the phases since the main suite)"
shown scripts/extras_check.sh "$extras_pid" "$extras_log"
phase "the chart's rendered manifests validated by a real API server in a restricted namespace (kubectl apply --dry-run=server; scripts/kube.sh builds the cluster once, ~10 min; run beside the phases since the main suite)"
shown "scripts/cluster.sh --validate" "$validate_pid" "$validate_log"
phase "the image (podman) and the Helm chart played as pods, short: a scale-out, two SIGKILLs, a rolled executor (scripts/pods.sh)"
bash scripts/pods.sh --actions 300 --rate 30 --short
phase "the seed's incidents through the pods: the table scripts/run.sh prints, the worker and every executor in a container"
bash scripts/pods.sh --incidents
phase "done"
