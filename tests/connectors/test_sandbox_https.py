"""The sandbox off this machine's loopback (a pod reaching the node, a compose service by its
name) serves https: the connectors refuse plain http there. Catches a sandbox that stays on
http once advertised elsewhere (every executor of scripts/cluster.sh crash-looped on
"plain http is refused except to loopback")."""

from __future__ import annotations

import tomllib
from pathlib import Path

from runonce.connectors.executor import registry
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.vendors.sandbox.local import LocalVendors


def test_a_sandbox_advertised_off_loopback_serves_https_its_connectors_trust(tmp_path: Path) -> None:
    # bound to loopback, advertised under a name that is not: as compose's `--advertise sandbox`
    sandbox = LocalVendors(tmp_path / "sandbox", advertise="localhost.sandbox.test").start()
    try:
        tables = tomllib.loads(sandbox.connectors_toml())["vendors"]
        assert tables["payments"]["base_url"].startswith("https://")
        assert tables["payments"]["ca_file"] == str(sandbox.ca_file)
        path = tmp_path / "connectors.toml"
        # the connectors reach it by loopback here; the certificate names 127.0.0.1 too
        path.write_text(sandbox.connectors_toml().replace("localhost.sandbox.test", "127.0.0.1"))
        built = registry.load(path, {})
        call = ActionCall("act-https-1", "charge_payment", {"card": "tok_visa", "amount_cents": 500}, "key-https-1")
        answer = built["payments"].connector.perform(call)
        assert answer.vendor_ref and [e.vendor for e in sandbox.ledger.effects()] == ["payments"]
    finally:
        sandbox.stop()
