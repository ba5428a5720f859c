#!/usr/bin/env bash
# The Helm chart played as pods (podman kube play), with the image built here, against the dev
# broker and the sandbox vendors, under a burst with a scale-out, SIGKILLs and a rolling restart;
# the oracle and the vendors' ledgers count the result (scripts/pods.py says how).
#   bash scripts/pods.sh                                   # the full storm: 3,000 actions at 60/s
#   bash scripts/pods.sh --actions 300 --rate 30 --short   # a short run
#   bash scripts/pods.sh --incidents                       # the seed's incidents through the pods
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh --test
bash scripts/image.sh
exec .venv/bin/python scripts/pods.py "$@"
