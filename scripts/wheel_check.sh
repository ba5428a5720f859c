#!/usr/bin/env bash
# What the Docker image gets (`pip install ".[all]"`): the wheel, installed non-editable into a clean
# venv, run from outside the source tree. Every module imports from site-packages, and
# `runonce demo` (broker, stream worker, sandbox vendors, executors) prints the incident table.
# Then what an agent gets (`pip install runonce`, no extras): the SDK alone, in a venv of its
# own, submits an email and awaits its outcome against that stack.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
cleanup() {
  RUNONCE_HOME="$work/home" "$work/venv/bin/runonce" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
wheel=$(bash scripts/wheel.sh "$work/dist")
[ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q uv  # an older .venv, set up before uv
uv="$PWD/.venv/bin/uv"
echo "wheel: $(basename "$wheel"), $(.venv/bin/python -m zipfile -l "$wheel" | tail -n +2 | wc -l) files"
python3 -m venv "$work/venv"
"$uv" pip install -q --python "$work/venv/bin/python" "$wheel[all,langchain,openai-agents,langgraph,temporal,pydantic-ai,otel,testing]"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import importlib
import importlib.util
import pkgutil

import runonce

# __main__ runs the CLI; the CrewAI adapter's extra cannot be installed beside [gateway]
# (CrewAI pins mcp<2): its test imports it in .venv-crewai
names = ["runonce"] + [m.name for m in pkgutil.walk_packages(runonce.__path__, "runonce.")
                       if not m.name.endswith(".__main__") and m.name != "runonce.integrations.crewai"]
for name in names:
    importlib.import_module(name)
assert "site-packages" in runonce.__file__, runonce.__file__
# every module imported above, so none of them needs the test tools, which the wheel leaves out
assert importlib.util.find_spec("runonce.testkit") is None, "the wheel carries runonce/testkit"
print(f"wheel: {len(names)} modules import from {runonce.__file__}, and no test tools are in it")
PY
# `runonce sandbox` (what docker-compose's sandbox service runs) answers on its HTTP port.
ports=$("$work/venv/bin/python" -c 'import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')
read -r http_port smtp_port <<<"$ports"
"$work/venv/bin/runonce" sandbox --http-port "$http_port" --smtp-port "$smtp_port" --dir "$work/sandbox" \
  --write-connectors "$work/sandbox/connectors.toml" 2>"$work/sandbox.log" &
sandbox=$!
for _ in $(seq 1 100); do
  "$work/venv/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$http_port/_ledger', timeout=1)" \
    2>/dev/null && break
  sleep 0.2
done
"$work/venv/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$http_port/_ledger', timeout=1)" \
  || { cat "$work/sandbox.log"; kill "$sandbox"; echo "wheel: runonce sandbox did not answer" >&2; exit 1; }
# ... and the connectors file it wrote reaches it: Stripe's key and SMTP's STARTTLS and AUTH
for _ in $(seq 1 50); do [ -s "$work/sandbox/connectors.toml" ] && break; sleep 0.1; done
RUNONCE_CONNECTORS="$work/sandbox/connectors.toml" "$work/venv/bin/runonce" connectors check --probe \
  || { cat "$work/sandbox.log"; kill "$sandbox"; echo "wheel: the sandbox's connectors do not probe" >&2; exit 1; }
kill "$sandbox"; wait "$sandbox" 2>/dev/null || true
echo "wheel: runonce sandbox answered on 127.0.0.1:$http_port"
RUNONCE_HOME="$work/home" "$work/venv/bin/runonce" demo

# The bare SDK: confluent-kafka and fastavro, none of the service's packages.
python3 -m venv "$work/sdk"
"$uv" pip install -q --python "$work/sdk/bin/python" "$wheel"
RUNONCE_HOME="$work/home" "$work/venv/bin/runonce" up 2>&1 | tail -n 1  # the demo's stack, with executors
bootstrap=$(RUNONCE_HOME="$work/home" "$work/venv/bin/python" -c 'from runonce.settings import Settings
print(Settings.from_env().bootstrap_servers())')
RUNONCE_BOOTSTRAP="$bootstrap" "$work/sdk/bin/python" - <<'PY'
import importlib.util
import os
import uuid

from runonce import ActionClient

service = [m for m in ("rocksdict", "faust", "mcp", "aiosmtpd", "prometheus_client", "avro", "pyarrow")
           if importlib.util.find_spec(m)]
assert not service, f"the bare SDK installed the service's packages: {service}"
with ActionClient(os.environ["RUNONCE_BOOTSTRAP"], agent_id="bare-sdk") as client:
    email = {"to": f"bare-{uuid.uuid4().hex[:6]}@example.com", "subject": "s", "body": "b"}
    outcome = client.submit("send_email", email).result(timeout=120)
assert outcome.status == "succeeded", outcome
print(f"wheel: the bare SDK (no extras) submitted an email and got its outcome: {outcome.status} {outcome.vendor_ref}")
PY
