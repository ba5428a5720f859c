#!/usr/bin/env bash
# The Helm chart installed unmodified on a real single-node Kubernetes built here (scripts/kube.sh),
# in a restricted namespace, against a secured Kafka (scripts/cluster.py says what it does):
#   bash scripts/cluster.sh                 # install, call through the gateway's Service; leaves it running
#   bash scripts/cluster.sh --uninstall     # the same, then uninstall and stop
#   bash scripts/cluster.sh --validate      # only the rendered chart, validated by the API server
#                                           # (the cluster stopped again after if it was not running)
set -euo pipefail
cd "$(dirname "$0")/.."
# what it needs: the venv and Helm (scripts/setup.sh --test); kube.sh builds the cluster's parts
[ -x .venv/bin/python ] && [ -x "${RUNONCE_CACHE_DIR:-$HOME/.cache/runonce}/bin/helm" ] || bash scripts/setup.sh --test
if [ "${1:-}" = --validate ]; then
  was_up=$(bash scripts/kube.sh status | grep -c '^kube-apiserver  *running' || true)
  status=0
  # a cluster this started is stopped again, whether it came up or not (half up, it would hold
  # its ports and processes for the next run)
  if bash scripts/kube.sh up; then
    .venv/bin/python scripts/cluster.py --validate || status=$?
  else
    status=$?
    echo "cluster: scripts/kube.sh up failed (exit $status)" >&2
  fi
  [ "$was_up" != 0 ] || bash scripts/kube.sh down
  exit "$status"
fi
bash scripts/kube.sh up
bash scripts/image.sh
bash scripts/kube.sh load "localhost/runonce:$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)"
exec .venv/bin/python scripts/cluster.py "$@"
