#!/usr/bin/env bash
# The Helm chart installed unmodified on a real single-node Kubernetes built here (scripts/kube.sh),
# in a restricted namespace, against a secured Kafka (scripts/cluster.py says what it does):
#   bash scripts/cluster.sh                 # install, call through the gateway's Service; leaves it running
#   bash scripts/cluster.sh --uninstall     # the same, then uninstall and stop
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
bash scripts/kube.sh up
bash scripts/image.sh
bash scripts/kube.sh load "localhost/runonce:$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)"
exec .venv/bin/python scripts/cluster.py "$@"
