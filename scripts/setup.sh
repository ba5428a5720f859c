#!/usr/bin/env bash
# Set up everything runonce needs on a fresh machine; safe to run again.
#   - Java 17+ and Maven (Debian packages) if missing
#   - a virtualenv in .venv with runonce installed (editable) and its test extras
#   - the Kafka broker's jars, resolved from Maven Central into ~/.cache/runonce
#   - prometheus and promtool, unpacked from Debian's prometheus package into ~/.cache/runonce
#   - Chromium (Debian's package), which the report test opens its page in
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${need_apt[*]} (Debian packages)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: missing ${need_apt[*]}: install Java 17+ and Maven, then run this again" >&2
    exit 2
  fi
fi

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing chromium (Debian package; the report test opens its page in it)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "setup: chromium missing: install Debian's chromium package (the report test needs it), then run this again" >&2
    exit 2
  fi
fi

PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "setup: Python >= 3.11 required" >&2; exit 2; }
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c 'import runonce.streams, hypothesis, pytest' >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.installed ]; then
  echo "setup: installing runonce and its dependencies into .venv"
  # uv (from PyPI, into the venv) resolves and installs in ~10 s what pip took ~45 s for
  .venv/bin/python -m pip install -q --upgrade pip uv
  .venv/bin/uv pip install -q --python .venv/bin/python -e '.[test]'
  touch .venv/.installed
fi
.venv/bin/runonce broker fetch
.venv/bin/runonce observe fetch
