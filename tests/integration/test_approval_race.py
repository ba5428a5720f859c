"""The 871-email race: two agent processes read the same approval as "pending" and both
send, at the same moment. runonce approves exactly one and drops the other with its reason."""

from __future__ import annotations

import multiprocessing as mp
import uuid
from typing import Any

import pytest

from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from tests.support.worker import WorkerProcess

pytestmark = pytest.mark.broker


def _agent(bootstrap: str, barrier: Any, email: dict[str, str], key: str, out: Any) -> None:
    with Submitter(bootstrap, agent_id=f"agent-{key}") as sub:
        barrier.wait(30)  # both processes past setup: now race
        out.put(sub.submit("send_email", email, idempotency_key=key))


def _race(bootstrap: str, email: dict[str, str], keys: tuple[str, str]) -> list[str]:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_agent, args=(bootstrap, barrier, email, k, out)) for k in keys]
    for p in procs:
        p.start()
    ids = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return ids


@pytest.mark.parametrize("same_key, reason", [(True, "duplicate_key"), (False, "content_window")])
def test_two_racing_workers_send_once(broker: Settings, stream_worker: WorkerProcess, decision_log: DecisionWatcher,
                                      same_key: bool, reason: str) -> None:
    approval = uuid.uuid4().hex[:8]
    email = {"to": f"lead-{approval}@example.com", "subject": "Intro", "body": "approved draft"}
    keys = (f"approval-{approval}",) * 2 if same_key else (f"dispatch-{approval}-a", f"dispatch-{approval}-b")
    ids = _race(broker.bootstrap_servers(), email, keys)  # type: ignore[arg-type]
    d = decision_log.wait(ids)
    outcomes = sorted((d[i]["outcome"], d[i]["reason"]) for i in ids)
    assert outcomes == [("APPROVED", "unique"), ("DROPPED", reason)]
    winner = next(i for i in ids if d[i]["outcome"] == "APPROVED")
    loser = next(i for i in ids if d[i]["outcome"] == "DROPPED")
    assert d[loser]["first_action_id"] == winner
