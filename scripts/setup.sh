#!/usr/bin/env bash
# Set up what runonce needs on a fresh machine; safe to run again, and twice at once.
#   bash scripts/setup.sh          # what the main job needs (scripts/run.sh: the broker, a stream
#                                  # worker, executors, the demo): nothing else
#   bash scripts/setup.sh --test   # that, and everything the tests use (scripts/test.sh)
#
# The main job:
#   - Java 17+ and Maven (Debian packages) if missing; the Kafka broker's jars, resolved from
#     Maven Central into ~/.cache/runonce
#   - PostgreSQL (Debian's package): the demo's refund row writes to a cluster of its own
#   - a virtualenv in .venv with runonce installed (editable) with [all]
# The tests, besides:
#   - .venv with runonce[test] and tests/connector_plugin (a third party's connector)
#   - iptables (Debian's package): the network fault injector's rules (runonce/testkit/faults.py)
#   - Chromium (Debian's package), which the report and approvals page tests open their pages in
#   - prometheus and promtool, unpacked from Debian's prometheus package into ~/.cache/runonce
#   - the vendors' own servers, pinned, with `go install` into ~/.cache/runonce/bin: Stripe's
#     stripe-mock and Mailpit (an SMTP relay with STARTTLS and AUTH); Helm, for the chart's
#     tests; Jaeger, the traces' store
#   - a venv with the legacy 1.x MCP SDK in ~/.cache/runonce/venvs/mcp1 (an agent that has not moved to 2.x)
#   - .venv-crewai: CrewAI and runonce (CrewAI pins mcp<2, so not in .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
for_tests=0
case "${1:-}" in
  --test) for_tests=1 ;;
  "") ;;
  -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup: unknown argument $1 (--test, or nothing)" >&2; exit 2 ;;
esac

cache=${RUNONCE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/runonce}
mkdir -p "$cache"
# One setup at a time on this machine: two clones share the cache (and apt's lock): the second
# waits for the first, then finds what it built.
exec 9>"$cache/.setup.lock"
if ! flock -n 9; then
  echo "setup: another setup is running on this machine (lock $cache/.setup.lock); waiting for it"
  flock 9
fi

apt_updated=0
apt_install() {  # WHY PACKAGE...: Debian packages, as root; else say what to install and stop
  local why=$1; shift
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing $* (Debian packages; $why)"
    [ $apt_updated = 1 ] || { apt-get update -qq; apt_updated=1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    echo "setup: missing $*: install them ($why), then run this again" >&2
    exit 2
  fi
}

need_apt=()
# the JDK, not only the JRE: a test helper (tests/support/ClientQuota.java) runs as a source file
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# PostgreSQL: the demo's refund row and the postgres connector's tests start a cluster of their
# own with its initdb and pg_ctl (connectors/vendors/sandbox/local_postgres.py)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need_apt+=(postgresql)
if [ $for_tests = 1 ]; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  # the fault injector (runonce/testkit/faults.py) adds its rules with iptables
  command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)
fi
[ ${#need_apt[@]} -eq 0 ] || apt_install "the broker runs on Java 17+ and Maven fetches its jars; the demo and the tests need the rest" "${need_apt[@]}"

PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "setup: Python >= 3.11 required" >&2; exit 2; }
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
# .venv/.installed names what was installed: 'all', or 'test' (which includes all)
installed_as=$(cat .venv/.installed 2>/dev/null || true)
if [ $for_tests = 1 ]; then want=test; check='import runonce.streams, hypothesis, pytest, runonce_followup'
else want=all; check='import runonce.streams, rocksdict, psycopg, aiosmtpd'; fi
if ! .venv/bin/python -c "$check" >/dev/null 2>&1 || [ pyproject.toml -nt .venv/.installed ] \
   || { [ $want = test ] && [ "$installed_as" != test ]; }; then
  echo "setup: installing runonce[$want] and its dependencies into .venv"
  # uv (from PyPI, into the venv) resolves and installs in ~10 s what pip took ~45 s for
  .venv/bin/python -m pip install -q --upgrade pip uv
  if [ $want = test ]; then
    # tests/connector_plugin: a third party's connector, found by its entry point (docs/connectors.md)
    .venv/bin/uv pip install -q --python .venv/bin/python -e '.[test]' -e tests/connector_plugin
  else
    .venv/bin/uv pip install -q --python .venv/bin/python -e '.[all]'
  fi
  echo "$want" > .venv/.installed
fi
.venv/bin/runonce broker fetch
[ $for_tests = 1 ] || exit 0

.venv/bin/runonce observe fetch

# An agent on the legacy MCP SDK (1.x), in a venv of its own beside the 2.x one runonce runs on:
# tests/integration/test_ways_in.py drives the gateway with it (tests/mcp1/client.py).
mcp1="$cache/venvs/mcp1"
if ! "$mcp1/bin/python" -c 'import mcp.client.streamable_http' >/dev/null 2>&1; then
  echo "setup: the 1.x MCP SDK (legacy agents' client) into $mcp1"
  "$PY" -m venv "$mcp1"
  .venv/bin/uv pip install -q --python "$mcp1/bin/python" 'mcp>=1.30,<2'
fi

# CrewAI in a venv of its own beside the repo (.venv-crewai): CrewAI 1.15 pins mcp<2, the
# gateway runs on 2.x. tests/integration/test_ways_in.py runs tests/crewai/crew_retry.py in it.
if ! .venv-crewai/bin/python -c 'import crewai, runonce.integrations.crewai' >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv-crewai/.installed ]; then
  echo "setup: CrewAI and runonce (editable) into .venv-crewai"
  "$PY" -m venv .venv-crewai
  .venv/bin/uv pip install -q --python .venv-crewai/bin/python -e '.[crewai]'
  touch .venv-crewai/.installed
fi

# The vendors' own servers (tests/support/vendor_servers.py); Go from Debian if the machine has none.
go_bin=$(command -v go || true)
[ -n "$go_bin" ] || { [ -x /usr/local/go/bin/go ] && go_bin=/usr/local/go/bin/go; }
have_go() {
  if [ -z "$go_bin" ]; then
    apt_install "go install builds the vendors' servers, Helm and Jaeger" golang-go
    go_bin=$(command -v go)
  fi
  mkdir -p "$cache/bin"
}
installed() {  # NAME SPEC: already built from this spec
  [ -x "$cache/bin/$1" ] && [ "$(cat "$cache/bin/.$1.version" 2>/dev/null)" = "$2" ]
}
go_install() {  # MODULE@VERSION NAME: once per version
  local module=$1 name=$2
  installed "$name" "$module" && return 0
  have_go
  echo "setup: go install $module (into $cache/bin)"
  GOBIN="$cache/bin" "$go_bin" install "$module"
  echo "$module" > "$cache/bin/.$name.version"
}
go_tool() {  # PACKAGE@VERSION NAME: a program whose module has replace directives, which
  # 'go install pkg@version' refuses: built as a tool of a module of our own (go get -tool)
  local spec=$1 name=$2 dir="$cache/go-tools/$2"
  installed "$name" "$spec" && return 0
  have_go
  echo "setup: go get -tool $spec, then go install tool (into $cache/bin; a few minutes once)"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && "$go_bin" mod init "runonce.local/tools/$name" >/dev/null 2>&1 \
     && "$go_bin" get -tool "$spec" && GOBIN="$cache/bin" "$go_bin" install tool)
  echo "$spec" > "$cache/bin/.$name.version"
}
go_install github.com/stripe/stripe-mock@v0.203.0 stripe-mock
go_install github.com/axllent/mailpit@v1.33.1 mailpit
# Helm, which lints and renders deploy/helm/runonce (tests/unit/test_chart.py); ~3 min to build once
go_install helm.sh/helm/v4/cmd/helm@v4.3.2 helm
# Jaeger, the traces' store and query API (tests/integration/test_traces.py); ~7 min to build once
go_tool github.com/jaegertracing/jaeger/cmd/jaeger@v1.75.0 jaeger
