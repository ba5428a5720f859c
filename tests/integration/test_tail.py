"""``runonce tail`` against the real broker and stream worker: filters by reason, agent and
tool, and --since/--until looked up by broker time."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from runonce.ops.cli import main
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from tests.support.worker import WorkerProcess

# The default runtime only: tail reads the topics, whichever runtime wrote them.
pytestmark = [pytest.mark.broker,
              pytest.mark.parametrize("stream_worker", ["transactional"], indirect=True, scope="module")]


def _repeats(broker: Settings, agent: str, n: int) -> list[str]:
    """One email sent n times with one key: one approval, n - 1 duplicate_key drops."""
    key, to = f"tail-{uuid.uuid4().hex[:8]}", f"{uuid.uuid4().hex[:8]}@x.com"
    with Submitter(broker.bootstrap_servers(), agent_id=agent) as sub:
        ids = [sub.submit("send_email", {"to": to, "body": "hi"}, idempotency_key=key) for _ in range(n)]
        sub.flush()
    return ids


def _tail_json(broker: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
               *args: str) -> list[dict[str, object]]:
    monkeypatch.setenv("RUNONCE_BOOTSTRAP", broker.bootstrap_servers())
    capsys.readouterr()
    assert main(["tail", "dropped", "--json", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_tail_filters_and_time_bounds(broker: Settings, stream_worker: WorkerProcess, decision_log: DecisionWatcher,
                                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    run = uuid.uuid4().hex[:6]
    before = decision_log.wait(_repeats(broker, f"early-{run}", 3))
    time.sleep(1.5)
    boundary_ms = int(time.time() * 1000)
    time.sleep(1.5)
    after = decision_log.wait(_repeats(broker, f"late-{run}", 4))
    boundary = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(boundary_ms / 1000)) + f".{boundary_ms % 1000:03d}Z"

    mine = {a for a, d in {**before, **after}.items() if d["outcome"] == "DROPPED"}
    since = [v for v in _tail_json(broker, monkeypatch, capsys, "--since", boundary) if v["action_id"] in mine]
    assert {v["action_id"] for v in since} == {a for a in after if after[a]["outcome"] == "DROPPED"}
    assert all(v["agent"] == f"late-{run}" and v["reason"] == "duplicate_key" for v in since)

    until = [v for v in _tail_json(broker, monkeypatch, capsys, "--until", boundary) if v["action_id"] in mine]
    assert {v["action_id"] for v in until} == {a for a in before if before[a]["outcome"] == "DROPPED"}

    by_agent = _tail_json(broker, monkeypatch, capsys, "--agent", f"early-{run}", "--reason", "duplicate_key")
    assert len(by_agent) == 2 and {v["agent"] for v in by_agent} == {f"early-{run}"}
    assert all(v["repeats"]["action_id"] in before for v in by_agent)  # type: ignore[index]
    assert _tail_json(broker, monkeypatch, capsys, "--agent", f"early-{run}", "--tool", "charge_payment") == []
