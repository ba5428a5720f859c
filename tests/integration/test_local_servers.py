"""The suite's own servers where the suite now uses them: two at once on one machine (two test
workers, two clones), and PostgreSQL off loopback as runonce's postgres connector requires it
there (scripts/cluster.py --incidents: the executors' pods reach it on the node's bridge)."""

from __future__ import annotations

import socket
from pathlib import Path

import psycopg
import pytest

from runonce.connectors.toolkit.tls import is_loopback
from runonce.connectors.vendors.sandbox.local_postgres import LocalPostgres
from runonce.testkit.vendor_servers import StripeMock


def test_two_stripe_mocks_run_side_by_side(tmp_path: Path) -> None:
    first = StripeMock(tmp_path / "first").start()
    try:
        second = StripeMock(tmp_path / "second").start()  # its HTTPS listener once took :12112 too: exit 1
        second.stop()
    finally:
        first.stop()


def machine_address() -> str:
    """This machine's address on its default route (a UDP connect sends no packet)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 9))
        return str(probe.getsockname()[0])


def test_postgres_off_loopback_takes_verified_tls_and_refuses_plaintext(tmp_path: Path) -> None:
    host = machine_address()
    assert not is_loopback(host), f"no address but loopback on this machine's default route: {host}"
    server = LocalPostgres(tmp_path / "pg", host=host)
    assert server.ca_file is not None and "sslmode=verify-full" in server.dsn
    server.start()
    try:
        with psycopg.connect(server.dsn) as conn:
            assert conn.info.host == host and conn.pgconn.ssl_in_use
        with pytest.raises(psycopg.OperationalError, match="no encryption"):
            psycopg.connect(server.dsn.replace("sslmode=verify-full", "sslmode=disable"))
    finally:
        server.stop()
