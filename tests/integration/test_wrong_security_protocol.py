"""TLS (or SASL) settings against the session's plaintext listener: every process stops within
seconds and names the handshake, where it used to wait out its timeout in silence (30 s for a
submit, 180 s for a worker's transactional init) and look like a broker that is down.

Catches: ``error_cb`` dropped from ``clients.base_config`` (every command times out, or ends in
"Broker transport failure" without a word of TLS); ``transactions.init_producer`` calling
init_transactions once with its whole timeout (the worker and the executor run past the bound);
``clients.metadata`` back to one blocking ``list_topics`` (``topics create``, ``tail``); the faust
worker's start without ``check_connects`` (aiokafka's "Unable to bootstrap", exit 1, the
handshake never named)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runonce.ops import child
from runonce.settings import Settings

#: the issue's acceptance bound; each process takes 1-4 s here (docs/measured.md has no figure of it)
BOUND_S = 15.0

COMMANDS = {
    "submit": ["submit", "send_email", "--params", '{"to": "a@example.com"}', "--key", "tls-1"],
    "topics create": ["topics", "create"],
    "tail": ["tail", "results"],
    "worker": ["worker", "--name", "tls-worker"],
    "worker --runtime faust": ["worker", "--name", "tls-faust", "--runtime", "faust"],
    "executor": ["executor", "--vendor", "payments"],
    "gateway": ["gateway", "serve", "--port", "0"],
}


WORDS = {"SSL": "TLS handshake", "SASL_SSL": "TLS handshake", "SASL_PLAINTEXT": "SASL handshake"}
#: TLS against every process; the other two protocols against one producer and one transactional init
CASES = [(command, "SSL") for command in sorted(COMMANDS)] + [
    (command, protocol) for protocol in ("SASL_SSL", "SASL_PLAINTEXT") for command in ("submit", "worker")]


@pytest.mark.parametrize("command, protocol", CASES)
def test_settings_that_cannot_connect_stop_every_process_and_name_the_handshake(
        broker: Settings, tmp_path: Path, command: str, protocol: str) -> None:
    properties = tmp_path / "client.properties"
    sasl = "sasl.mechanism=PLAIN\nsasl.username=agent\nsasl.password=planted-secret\n" if "SASL" in protocol else ""
    properties.write_text(f"security.protocol={protocol}\n{sasl}")
    connectors = tmp_path / "connectors.toml"
    connectors.write_text('[vendors.payments]\nkind = "stripe"\nbase_url = "http://127.0.0.1:9"\n'
                          'api_key = { env = "STRIPE_API_KEY" }\n')
    env = {**os.environ, "RUNONCE_HOME": str(tmp_path / "home"), "RUNONCE_BOOTSTRAP": broker.bootstrap_servers(),
           "RUNONCE_KAFKA_CONFIG": str(properties), "RUNONCE_CONNECTORS": str(connectors),
           "STRIPE_API_KEY": "sk_test_planted"}
    try:
        done = child.run(COMMANDS[command], env, BOUND_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"runonce {command} with security.protocol={protocol} against a plaintext listener still ran "
                    f"after {BOUND_S:.0f} s: {exc.stderr!r}")
    said = done.stdout + done.stderr
    assert done.returncode == 2, said  # FatalError: a human must fix the settings
    assert WORDS[protocol] in said and "librdkafka:" in said, said
    assert "planted" not in said, said
