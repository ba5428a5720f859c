from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from runonce.connectors.executor import registry
from runonce.connectors.toolkit.base import Connector
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.connectors.vendors.sandbox.smtp_server import SmtpServer


@pytest.fixture()
def local(tmp_path: Path) -> Iterator[LocalVendors]:
    """The sandboxes with their credentials and CA: Stripe's key, SMTP's STARTTLS and AUTH."""
    sandbox = LocalVendors(tmp_path / "sandbox").start()
    yield sandbox
    sandbox.stop()


@pytest.fixture()
def vendors(local: LocalVendors) -> VendorServer:
    return local.vendors


@pytest.fixture()
def smtp(local: LocalVendors) -> SmtpServer:
    return local.smtp


@pytest.fixture()
def connectors(local: LocalVendors) -> dict[str, Connector]:
    """Every sandbox vendor's connector, built from the connectors file as an executor builds it."""
    return {name: v.connector for name, v in registry.load(local.write_connectors(), {}).items()}
