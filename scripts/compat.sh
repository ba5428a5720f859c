#!/usr/bin/env bash
# Broker versions teams run: the transactional runtime's exactly-once crash test (SIGKILLed
# workers, the oracle accounts for every record) and the executor's crash tests (SIGKILL before
# the vendor call, after it, after the commit), each against a local broker of every version in
# RUNONCE_COMPAT_VERSIONS (default: 3.9.1, the last 3.x line; 4.0.2, the oldest 4.x line; 4.4.0, the default).
# One line per version in bench/out/compat-<time>.txt; docs/measured.md records the results.
# Exit status: the number of versions that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
versions=${RUNONCE_COMPAT_VERSIONS:-"3.9.1 4.0.2 4.4.0"}
mkdir -p bench/out
out=bench/out/compat-$(date +%Y%m%d-%H%M%S).txt
failed=0
for v in $versions; do
  echo "compat: Kafka $v" >&2
  RUNONCE_KAFKA_VERSION=$v .venv/bin/runonce broker fetch >&2 || { echo "Kafka $v: jars not fetched" | tee -a "$out"; failed=$((failed + 1)); continue; }
  started=$(date +%s)
  RUNONCE_KAFKA_VERSION=$v .venv/bin/pytest -q -p no:cacheprovider \
    tests/integration/test_crash.py tests/integration/test_executor.py \
    -k "(test_sigkilled_workers_neither_double_nor_lose and transactional and not kip848) or test_sigkill_at_each_point" \
    > "bench/out/compat-$v.log" 2>&1
  rc=$?
  summary=$(tail -n 1 "bench/out/compat-$v.log")
  echo "Kafka $v: $([ $rc = 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - started )) s: $summary" | tee -a "$out"
  [ $rc = 0 ] || failed=$((failed + 1))
done
echo "compat: results in $out" >&2
exit $failed
