"""The local broker's private CA, made with openssl the first time a secured broker starts:
the CA, the broker's certificate (127.0.0.1, localhost and ``RUNONCE_BROKER_HOST``), and one client certificate per
principal (``CN=<name>``, mapped to ``User:<name>`` by the mTLS listener's
``ssl.principal.mapping.rules``). Keys are PKCS#8 PEM, readable only by their owner; Kafka
reads PEM key stores and trust stores directly (``ssl.keystore.type=PEM``).

A deployment on a network uses its own CA; this one exists so that the dev broker and the
secured tests run TLS the way production does."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from runonce.errors import BrokerSetupError

DAYS = "825"


@dataclass(frozen=True, slots=True)
class Pki:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        """The broker's key and certificate chain in one PEM file."""
        return self.folder / "broker-keystore.pem"

    def client_cert(self, name: str) -> Path:
        return self.folder / "clients" / f"{name}.pem"

    def client_key(self, name: str) -> Path:
        return self.folder / "clients" / f"{name}.key"


def _openssl(*args: str, cwd: Path) -> None:
    try:
        done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerSetupError(f"openssl {args[0]}: {exc}") from exc
    if done.returncode != 0:
        raise BrokerSetupError(f"openssl {' '.join(args[:2])} failed: {done.stderr[-1500:]}")


def _key(path: Path, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=cwd)
    os.chmod(path, 0o600)


def _issue(pki: Pki, name: str, key: Path, cert: Path, subject: str, extensions: str) -> None:
    csr = pki.folder / f"{name}.csr"
    ext = pki.folder / f"{name}.ext"
    ext.write_text(extensions)
    _key(key, pki.folder)
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr), cwd=pki.folder)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki.ca), "-CAkey", str(pki.folder / "ca.key"),
             "-CAcreateserial", "-days", DAYS, "-sha256", "-extfile", str(ext), "-out", str(cert), cwd=pki.folder)
    csr.unlink()
    ext.unlink()


def ensure_pki(folder: Path, principals: list[str], host: str = "127.0.0.1") -> Pki:
    """The CA once; the broker's certificate once per address it serves on (``host`` besides
    127.0.0.1 and localhost); a client certificate for each principal that has none yet."""
    pki = Pki(folder)
    (folder / "clients").mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    if not pki.ca.exists():
        _key(folder / "ca.key", folder)
        _openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=runonce local CA", "-days", DAYS,
                 "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", str(pki.ca), cwd=folder)
    names = "IP:127.0.0.1,DNS:localhost" + ("" if host in ("127.0.0.1", "localhost") else f",IP:{host}")
    served = folder / "broker.names"
    if not pki.broker_keystore.exists() or not served.exists() or served.read_text() != names:
        key, cert = folder / "broker.key", folder / "broker.pem"
        _issue(pki, "broker", key, cert, "/CN=localhost",
               f"subjectAltName={names}\nextendedKeyUsage=serverAuth,clientAuth\n")
        pki.broker_keystore.write_text(key.read_text() + cert.read_text() + pki.ca.read_text())
        os.chmod(pki.broker_keystore, 0o600)
        served.write_text(names)
    for name in principals:
        if not pki.client_cert(name).exists():
            _issue(pki, f"client-{name}", pki.client_key(name), pki.client_cert(name), f"/CN={name}",
                   "extendedKeyUsage=clientAuth\n")
    return pki
