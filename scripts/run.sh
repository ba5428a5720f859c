#!/usr/bin/env bash
# Set up, start the local stack (Kafka broker, topics, a stream worker) and replay the
# seed's incidents through runonce. `.venv/bin/runonce down` stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/runonce demo
