"""The controller-only configuration a crashed one-node broker restarts through, and the fence
it waits for (runonce/devbroker/retire.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runonce.devbroker.broker import Broker
from runonce.devbroker.retire import controller_only, fenced_in, wait_until_fenced
from runonce.devbroker.users import write_users
from runonce.errors import BrokerSetupError
from runonce.settings import Settings


@pytest.mark.parametrize("secured", [False, True])
def test_the_controller_alone_keeps_its_listener_and_quorum_and_drops_the_brokers(tmp_path: Path,
                                                                                  secured: bool) -> None:
    users_file = tmp_path / "users.properties"
    if secured:
        write_users(users_file, ["admin", "agent"])
    broker = Broker(Settings(home=tmp_path / "home", broker_users_file=users_file if secured else None))
    broker.dir.mkdir(parents=True)
    props = broker.properties(9092, 9093, 9094)
    alone = controller_only(props, 9093)
    assert alone["process.roles"] == "controller"
    assert alone["listeners"] == "CONTROLLER://127.0.0.1:9093"
    for same in ("node.id", "log.dirs", "controller.quorum.voters", "controller.listener.names",
                 "listener.security.protocol.map"):
        assert alone[same] == props[same]
    # the dead broker is fenced on a short lease, not the node's own (kept long for pauses)
    assert int(alone["broker.session.timeout.ms"]) < int(props["broker.session.timeout.ms"])
    # Kafka refuses a controller-only node that names a broker's listener
    assert not {key for key in alone if key.startswith(("advertised.", "inter.broker."))}
    assert not {key for key in alone if key.startswith("listener.name.") and not key.startswith("listener.name.controller.")}
    if secured:  # the broker still reaches it as admin over SASL/PLAIN
        assert alone["listener.name.controller.plain.sasl.jaas.config"] == props["listener.name.controller.plain.sasl.jaas.config"]


def test_the_fence_of_this_node_is_what_ends_the_wait(tmp_path: Path) -> None:
    line = "[2026-12-04 17:52:04,536] INFO [QuorumController id=1] Fencing broker 1 at epoch 11 because its session has timed out."
    assert fenced_in(line, "1")
    assert not fenced_in(line.replace("broker 1", "broker 12"), "1")
    log = tmp_path / "broker.log"
    log.write_text(line + "\n")
    assert not wait_until_fenced(log, log.stat().st_size, "1", lambda: True, timeout_s=0.3)  # only what follows counts
    with open(log, "a") as fh:
        fh.write(line + "\n")
    assert wait_until_fenced(log, len(line) + 1, "1", lambda: True, timeout_s=5)
    with pytest.raises(BrokerSetupError, match="controller exited"):
        wait_until_fenced(log, log.stat().st_size, "1", lambda: False, timeout_s=5)
