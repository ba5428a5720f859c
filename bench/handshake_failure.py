"""How long each runonce process takes to stop, and what it says, when its Kafka settings cannot
work against the listener (TLS or SASL against a plaintext one), beside the reference measured in
the same run: the same command against a broker that is down (a closed port), which a process
must wait out, because a broker may come back.

Before clients.ConnectionWatch the two looked alike: a submit said "1 actions undelivered after
30 s" either way, a worker retried init_transactions for 180 s.

    .venv/bin/python bench/handshake_failure.py [--reference]

``--reference`` adds the broker-down runs (about 35 s each for submit and topics create; the
worker's and the executor's are bounded by the bench at 40 s, they would wait 180 s)."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_broker import local_broker  # noqa: E402
from runonce.ops import child  # noqa: E402

# every long-running process and every command that talks to Kafka, as the test runs them
from tests.integration.test_wrong_security_protocol import COMMANDS  # noqa: E402

BOUND_S = 40.0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.monotonic()
    try:
        done = child.run(argv, env, BOUND_S)
        said = (done.stdout + done.stderr).strip().splitlines()
        return time.monotonic() - started, said[-1] if said else f"exit {done.returncode}"
    except subprocess.TimeoutExpired:
        return time.monotonic() - started, f"still running after {BOUND_S:.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", action="store_true", help="also time each command against a closed port")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    (folder / "tls.properties").write_text("security.protocol=SSL\n")
    (folder / "connectors.toml").write_text('[vendors.payments]\nkind = "stripe"\nbase_url = "http://127.0.0.1:9"\n'
                                            'api_key = { env = "STRIPE_API_KEY" }\n')
    with local_broker("handshake", lambda m: print(m, file=sys.stderr)) as settings:
        base = {**os.environ, "RUNONCE_HOME": str(folder / "home"), "STRIPE_API_KEY": "sk_test_bench",
                "RUNONCE_CONNECTORS": str(folder / "connectors.toml")}
        tls = {**base, "RUNONCE_BOOTSTRAP": settings.bootstrap_servers(),
               "RUNONCE_KAFKA_CONFIG": str(folder / "tls.properties")}
        down = {**base, "RUNONCE_BOOTSTRAP": f"127.0.0.1:{closed_port()}"}
        print("| command | TLS against a plaintext listener | what it said | broker down (reference) |")
        print("|---|---|---|---|")
        for name, argv in COMMANDS.items():
            took, said = run(argv, tls)
            reference = ""
            if args.reference:
                ref_took, ref_said = run(argv, down)
                reference = f"{ref_took:.1f} s: {ref_said[:80]}"
            print(f"| {name} | {took:.1f} s | {said[:120]} | {reference} |", flush=True)


if __name__ == "__main__":
    main()
