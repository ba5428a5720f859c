from __future__ import annotations

from typing import Iterator

import pytest

from runonce.connectors.sandbox.http_vendors import VendorServer
from runonce.connectors.sandbox.smtp_server import SmtpServer


@pytest.fixture()
def vendors() -> Iterator[VendorServer]:
    server = VendorServer().start()
    yield server
    server.stop()


@pytest.fixture()
def smtp(vendors: VendorServer) -> Iterator[SmtpServer]:
    server = SmtpServer(vendors.ledger).start()
    yield server
    server.stop()
