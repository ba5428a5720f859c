"""The vendors' own servers, where they run here: Stripe's ``stripe-mock`` (it checks every
request against Stripe's OpenAPI spec) and Mailpit (an SMTP relay that requires STARTTLS or TLS
and AUTH, as relays on 587 and 465 do, and counts what it received through its own API).
``scripts/setup.sh`` installs both with ``go install``; a test that needs one never skips."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import trustme

from runonce.devbroker.broker import free_ports, stop_group
from runonce.settings import Settings

STRIPE_MOCK = "stripe-mock"
MAILPIT = "mailpit"


def binary(name: str) -> Path:
    path = Settings.from_env().cache_dir / "bin" / name
    if not path.is_file():
        raise AssertionError(f"{path} is missing: bash scripts/setup.sh installs it (go install)")
    return path


def wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{url}: the server exited {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered:\n{log.read_text()[-2000:]}")


class StripeMock:
    """stripe-mock on a free loopback port; any ``sk_test_`` key is a valid one to it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        # its HTTPS listener too: by default it binds :12112, which a second stripe-mock (another
        # test worker's, another clone's) would find taken and exit
        self.port, self.https_port = free_ports(2)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> StripeMock:
        log = self.folder / "stripe-mock.log"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([str(binary(STRIPE_MOCK)), "-http-addr", f"127.0.0.1:{self.port}",
                                      "-https-addr", f"127.0.0.1:{self.https_port}"],
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        wait_http(f"{self.url}/v1/balance", self.proc, log, {"Authorization": "Bearer sk_test_probe"})
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc.pid)
            self.proc.wait(10)


class Mailpit:
    """Mailpit requiring ``tls`` ("starttls": STARTTLS before anything, as on 587; "implicit":
    TLS from the first byte, as on 465) and AUTH as ``user``; its certificate from a CA of the
    test's own (``ca_file``)."""

    def __init__(self, folder: Path, tls: str, user: str, password: str) -> None:
        self.folder, self.tls, self.user, self.password = folder, tls, user, password
        self.smtp_port, self.http_port = free_ports(2)
        self.api = f"http://127.0.0.1:{self.http_port}/api/v1"
        self.ca_file = folder / "ca.pem"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Mailpit:
        self.folder.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        leaf = ca.issue_cert("127.0.0.1", "localhost")
        ca.cert_pem.write_to_path(str(self.ca_file))
        leaf.private_key_pem.write_to_path(str(self.folder / "key.pem"))
        leaf.cert_chain_pems[0].write_to_path(str(self.folder / "cert.pem"))
        auth = self.folder / "smtp-auth"
        auth.write_text(f"{self.user}:{self.password}\n")
        require = "--smtp-require-starttls" if self.tls == "starttls" else "--smtp-require-tls"
        log = self.folder / "mailpit.log"
        self.proc = subprocess.Popen(
            [str(binary(MAILPIT)), "--smtp", f"127.0.0.1:{self.smtp_port}", "--listen", f"127.0.0.1:{self.http_port}",
             "--smtp-tls-cert", str(self.folder / "cert.pem"), "--smtp-tls-key", str(self.folder / "key.pem"),
             require, "--smtp-auth-file", str(auth), "--disable-version-check",
             "--database", str(self.folder / "mailpit.db"), "--max", "0"],
            stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        wait_http(f"{self.api}/messages?limit=1", self.proc, log)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc.pid)
            self.proc.wait(10)

    def messages(self) -> list[dict[str, Any]]:
        """Every message Mailpit received, from its own API, page by page."""
        out: list[dict[str, Any]] = []
        while True:
            with urllib.request.urlopen(f"{self.api}/messages?start={len(out)}&limit=500", timeout=10) as resp:
                page = json.load(resp)
            out += page["messages"]
            if not page["messages"] or len(out) >= page["messages_count"]:
                return out

    def received_by(self) -> dict[str, int]:
        """Messages per envelope recipient (To, Cc and Bcc as Mailpit saw them)."""
        counts: dict[str, int] = {}
        for m in self.messages():
            for who in (m.get("To") or []) + (m.get("Cc") or []) + (m.get("Bcc") or []):
                counts[who["Address"]] = counts.get(who["Address"], 0) + 1
        return counts

    def connectors_toml(self, name: str = "email", sender: str = "agent@runonce.example") -> str:
        return (f'[vendors.{name}]\nkind = "smtp"\nhost = "127.0.0.1"\nport = {self.smtp_port}\n'
                f'tls = "{self.tls}"\nca_file = "{self.ca_file}"\nusername = {{ env = "RUNONCE_TEST_SMTP_USER" }}\n'
                f'password = {{ env = "RUNONCE_TEST_SMTP_PASSWORD" }}\nsender = "{sender}"\ntools = ["send_email"]\n')

    def secrets_env(self) -> dict[str, str]:
        return {"RUNONCE_TEST_SMTP_USER": self.user, "RUNONCE_TEST_SMTP_PASSWORD": self.password}
