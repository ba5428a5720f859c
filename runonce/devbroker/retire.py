"""Retiring a crashed one-node broker's dead registration before the node starts again.

Why it is needed is in ``Broker._retire_dead_incarnation``; this module holds its two parts
that need no process: the controller-only configuration, and reading the controller's log
for the fence."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Callable

from runonce.errors import BrokerSetupError

#: the controller alone holds only the metadata log
CONTROLLER_ONLY_HEAP_MB = 256
#: the dead broker's lease while the controller is alone: it fences a broker that cannot answer,
#: so nothing is gained by waiting out the node's own 30 s lease (broker.py), kept long for pauses
RETIRE_LEASE_MS = 3000
#: the JVM's start, the metadata log's replay and that lease
RETIRE_TIMEOUT_S = 60.0

#: keys only a broker reads; a node running as controller alone must not carry them
_BROKER_ONLY_KEYS = ("advertised.listeners", "inter.broker.listener.name", "sasl.mechanism.inter.broker.protocol")
_BROKER_ONLY_PREFIXES = ("listener.name.sasl_ssl.", "listener.name.ssl.")


def controller_only(props: dict[str, str], controller_port: int) -> dict[str, str]:
    """The node's configuration with its broker taken out: the same id, data folder, quorum and
    controller listener (with its security), so it replays the same metadata log; and a short
    lease, since the broker it will fence is dead."""
    kept = {key: value for key, value in props.items()
            if key not in _BROKER_ONLY_KEYS and not key.startswith(_BROKER_ONLY_PREFIXES)}
    kept["process.roles"] = "controller"
    kept["listeners"] = f"CONTROLLER://127.0.0.1:{controller_port}"
    kept["broker.session.timeout.ms"] = str(RETIRE_LEASE_MS)
    return kept


#: after the fence is decided, before the controller is stopped: the fence's record is appended,
#: flushed and committed after the decision's line (370 ms after it, under load in CI); a
#: controller stopped 100 ms after deciding had not written it, the node came back on the dead
#: registration, and the markers this retirement exists for were skipped after all
FENCE_SETTLE_S = 2.0


def fenced_in(log_text: str, node_id: str) -> bool:
    """Whether the controller's log says it fenced broker ``node_id`` (Kafka's QuorumController
    logs "Fencing broker 1 at epoch 11 because its session has timed out")."""
    return re.search(rf"Fencing broker {re.escape(node_id)} at epoch", log_text) is not None


def wait_until_fenced(log_file: Path, log_from: int, node_id: str, alive: Callable[[], bool],
                      timeout_s: float) -> bool:
    """Wait until the log, read from byte ``log_from``, shows broker ``node_id`` fenced: True.
    False when ``timeout_s`` passes first (a broker that crashed before it ever registered has
    nothing to fence). A controller that exits meanwhile is a setup error, with its last lines."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(log_file, "rb") as fh:
            fh.seek(log_from)
            text = fh.read().decode(errors="replace")
        if fenced_in(text, node_id):
            time.sleep(FENCE_SETTLE_S)
            return True
        if not alive():
            raise BrokerSetupError("the controller exited while retiring the crashed broker; last log lines:\n"
                                   + "\n".join(text.splitlines()[-30:]))
        time.sleep(0.2)
    return False
