"""TLS for every connector: certificates verified against the system's CAs, or the vendor's
``ca_file``; traffic in clear only to this machine (loopback), where a sandbox or a vendor's
own mock server runs."""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def client_context(ca_file: Path | None) -> ssl.SSLContext:
    """Verifies the server's certificate and name; ``ca_file`` replaces the system's CAs."""
    return ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
