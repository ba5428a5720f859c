"""Partitions, not crashes: a live process cut off from the broker (runonce/testkit/faults.py)
while it can still reach everything else. The zombie executor is the case Kafka's fencing
exists for, and the one fencing alone does not cover: fencing refuses a zombie's *commit*,
not its call to the vendor."""

from __future__ import annotations

import time
import uuid

import pytest

from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.vendors.jira import label as jira_label
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.settings import Settings
from runonce.testkit.faults import Faults
from tests.integration.test_executor import FAST_TAKEOVER, approve_all, final_result, own_approved_topic
from tests.support.worker import RunonceProcess

pytestmark = pytest.mark.broker


def broker_ports(settings: Settings) -> list[int]:
    return [int(address.rsplit(":", 1)[1]) for address in settings.bootstrap_servers().split(",")]


def test_a_zombie_executor_never_makes_a_second_ticket(broker: Settings, sandboxes: LocalVendors, faults: Faults,
                                                       tmp_path) -> None:
    """Executor A commits its intents for 4 Jira tickets, then stops for 20 s (a long GC pause,
    a frozen VM: the ``stall_before_call`` failpoint) while its link to the broker is cut. Its
    session expires; B takes the partitions, finds the intents without results and asks Jira,
    which has nothing yet: B creates the tickets. A wakes, still cut from Kafka but not from
    Jira. Fencing would refuse A's result commit, but not its calls: A must not make them.
    Each ticket exists once, and B's results say so."""
    vendors = sandboxes.vendors
    bootstrap = broker.bootstrap_servers()
    source = own_approved_topic(bootstrap)
    run = uuid.uuid4().hex[:6]
    actions = [("create_jira_ticket", {"project": "SUP", "customer_id": "c", "description": f"zombie {run} {i}"},
                f"zombie-{run}-{i}") for i in range(4)]
    requests = approve_all(bootstrap, source, actions)
    env = {**sandboxes.env({"jira": {"search_lag_s": "1", "timeout_s": "5"}}), **FAST_TAKEOVER}
    argv = ["executor", "--vendor", "jira", "--source-topic", source, "--group", f"g-zombie-{run}",
            "--loglevel", "info"]
    zombie = RunonceProcess(broker, f"zombie-{run}", [*argv, "--slot", "a"], tmp_path,
                            {**env, "RUNONCE_EXECUTOR_FAILPOINT": "stall_before_call:20"})
    heir = RunonceProcess(broker, f"heir-{run}", [*argv, "--slot", "b"], tmp_path, env)
    zombie.start()
    try:
        assert zombie.proc is not None
        faults.place("zombie", zombie.proc.pid)
        deadline = time.monotonic() + 60
        while "stall_before_call: stopped" not in zombie.log_tail(200):
            assert time.monotonic() < deadline and zombie.alive(), f"never stalled:\n{zombie.describe()}"
            time.sleep(0.1)
        cut = faults.cut("zombie", broker_ports(broker))  # its intents are committed: now it is cut off
        heir.start()
        results = [final_result(bootstrap, r["action_id"], timeout_s=90) for r in requests]
        deadline = time.monotonic() + 60  # the zombie wakes at 20 s: let it do whatever it would
        while "stall_before_call: going on" not in zombie.log_tail(200) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(8)  # its calls, had it made them, are in the ledger by now (5 s timeout each)
        faults.heal(cut)
        created = [len(vendors.ledger.effects("jira", jira_label(ActionCall(r["action_id"], r["tool"], {}, key))))
                   for r, (_, _, key) in zip(requests, actions)]
        assert created == [1, 1, 1, 1], f"tickets per action {created}\n{zombie.describe()}\n{heir.describe()}"
        assert [r["status"] for r in results] == ["succeeded"] * 4, results
        assert "going on" in zombie.log_tail(200), zombie.describe()  # the fault applied: it woke cut off
    finally:
        zombie.stop()
        heir.stop()
