"""Human approval in the stream job's logic (streams/holds.py over the same Pipeline every
runtime runs, in memory): held, released once whoever approves, denied, expired on event
time, and a replay that never reopens a hold."""

from __future__ import annotations

import time

import pytest

from runonce.core.policy import PolicyBook
from runonce.errors import ConfigError
from runonce.kafka import topics
from runonce.streams.metrics import StreamMetrics
from runonce.streams.ports import Inbound
from runonce.streams.processor import Pipeline
from runonce.wire.codec import Codec
from tests.support.memory import MemoryPipeline, MemoryStore

T0 = 1_800_000_000_000
HOUR = 3_600_000
POLICIES = PolicyBook.from_toml("""
[tools.charge_payment]
key = "require"
approval = { above = { amount_cents = 50000 }, expires = "1h" }

[tools.send_email]
scope = ["to"]
content_window = { window = "24h" }
approval = { always = true, expires = "1h" }
""")


def charge(pipe: MemoryPipeline, cents: int, key: str, at_ms: int = T0) -> str:
    record = pipe.feed("charge_payment", {"card": "tok", "amount_cents": cents}, timestamp_ms=at_ms, key=key)
    return str(record["action_id"])


def test_an_action_over_its_threshold_is_held_and_one_under_it_approved() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    big, small = charge(pipe, 75_000, "k-big"), charge(pipe, 100, "k-small")
    held = pipe.decision_for(big)
    assert (held["outcome"], held["hold_why"], held["hold_expires_at_ms"]) == (
        "HELD", "amount_cents 75000 > 50000", T0 + HOUR)
    assert [d["request"]["action_id"] for d in pipe.decisions(topics.APPROVED)] == [small]
    assert [d["request"]["action_id"] for d in pipe.decisions(topics.HELD)] == [big]


def test_a_scoped_action_is_held_after_its_scope_rules_on_the_scope_partition() -> None:
    pipe = MemoryPipeline(policies=POLICIES, inline_scopes=True)
    first = pipe.feed("send_email", {"to": "lead@example.com", "subject": "s"}, timestamp_ms=T0)
    again = pipe.feed("send_email", {"to": "lead@example.com", "subject": "s"}, timestamp_ms=T0 + 1)
    assert pipe.decision_for(first["action_id"])["outcome"] == "HELD"
    # its repeat is dropped as a repeat of the held action, as any repeat is
    repeat = pipe.decision_for(again["action_id"])
    assert (repeat["outcome"], repeat["first_action_id"]) == ("DROPPED", first["action_id"])


def test_two_approvers_release_it_once_and_the_second_is_told_who_did() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    big = charge(pipe, 75_000, "k1")
    pipe.verdict(big, "approve", approver="alice", timestamp_ms=T0 + 10)
    pipe.verdict(big, "approve", approver="bob", timestamp_ms=T0 + 10)
    pipe.verdict(big, "approve", approver="alice", timestamp_ms=T0 + 20)  # a second click
    released = pipe.decisions(topics.APPROVED)
    assert [(d["request"]["action_id"], d["verdict_by"]) for d in released] == [(big, "alice")]
    assert [(v["approver"], v["change"], v["decided_by"]) for v in pipe.verdicts()] == [
        ("alice", "release", "alice"), ("bob", "none", "alice"), ("alice", "none", "alice")]
    assert pipe.verdicts()[1]["note"] == "already released by alice"


def test_a_deny_drops_it_and_no_later_approve_releases_it() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    big = charge(pipe, 75_000, "k1")
    pipe.verdict(big, "deny", approver="carol", timestamp_ms=T0 + 10, reason="not this customer")
    pipe.verdict(big, "approve", approver="alice", timestamp_ms=T0 + 20)
    assert pipe.decisions(topics.APPROVED) == []
    dropped = pipe.decision_for(big)
    assert (dropped["outcome"], dropped["reason"], dropped["verdict_by"]) == ("DROPPED", "approval_denied", "carol")
    assert [v["change"] for v in pipe.verdicts()] == ["deny", "none"]


def test_its_own_agent_cancels_a_held_action_as_a_deny_by_that_agent() -> None:
    pipe = MemoryPipeline(policies=POLICIES)  # MemoryPipeline's requests are agent "test"'s
    big = charge(pipe, 75_000, "k1")
    pipe.cancel(big, agent_id="test", timestamp_ms=T0 + 10, reason="the user gave up")
    pipe.verdict(big, "approve", approver="alice", timestamp_ms=T0 + 20)
    assert pipe.decisions(topics.APPROVED) == []
    dropped = pipe.decision_for(big)
    assert (dropped["outcome"], dropped["reason"], dropped["verdict_by"]) == ("DROPPED", "approval_denied",
                                                                              "agent:test")
    assert [(v["approver"], v["verdict"], v["change"], v["reason"]) for v in pipe.verdicts()] == [
        ("agent:test", "deny", "deny", "the user gave up"), ("alice", "approve", "none", "")]
    assert pipe.verdicts()[1]["note"] == "already denied by agent:test"


def test_another_agents_cancel_changes_nothing_and_is_recorded() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    big = charge(pipe, 75_000, "k1")
    pipe.cancel(big, agent_id="intruder", timestamp_ms=T0 + 10)
    pipe.verdict(big, "approve", approver="alice", timestamp_ms=T0 + 20)
    assert [(d["request"]["action_id"], d["verdict_by"]) for d in pipe.decisions(topics.APPROVED)] == [(big, "alice")]
    assert [(v["approver"], v["change"], v["note"]) for v in pipe.verdicts()][0] == (
        "agent:intruder", "none", "only the agent that asked for an action may cancel it")


def test_a_cancel_after_the_release_changes_nothing_and_a_redelivered_cancel_drops_once() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    released, cancelled = charge(pipe, 75_000, "k1"), charge(pipe, 80_000, "k2")
    pipe.verdict(released, "approve", approver="alice", timestamp_ms=T0 + 10)
    pipe.cancel(released, agent_id="test", timestamp_ms=T0 + 20)
    assert pipe.decision_for(released)["outcome"] == "APPROVED"
    assert pipe.verdicts()[-1]["note"] == "already released by alice"
    once = pipe.cancel(cancelled, agent_id="test", timestamp_ms=T0 + 30, cancel_id="c-1")
    pipe.redeliver(once)  # as after a crash before its offset's commit
    drops = [d for d in pipe.decisions(topics.DROPPED) if d["request"]["action_id"] == cancelled]
    assert len({d["verdict_id"] for d in drops}) == 1 and drops[-1]["verdict_by"] == "agent:test"


def test_an_approver_named_as_an_agent_decides_nothing() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    big = charge(pipe, 75_000, "k1")
    pipe.verdict(big, "deny", approver="agent:test", timestamp_ms=T0 + 10)
    assert pipe.decision_for(big)["outcome"] == "HELD"
    assert pipe.verdicts()[0]["change"] == "none"


def test_a_cancel_that_cannot_be_read_is_dead_lettered() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    pipe.process(Inbound(topics.CANCELS, 0, 0, T0, b"x", b"not a cancel"))
    assert len(pipe.outputs[topics.DLQ]) == 1


def test_a_hold_expires_on_event_time_and_a_late_approve_changes_nothing() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    big = charge(pipe, 75_000, "k1")
    partition = pipe.decision_for(big)["hold_partition"]
    pipe.tick(partition, T0 + HOUR - 1)
    assert pipe.decision_for(big)["outcome"] == "HELD"  # not due yet
    pipe.tick(partition, T0 + HOUR)
    expired = pipe.decision_for(big)
    assert (expired["outcome"], expired["reason"], expired["verdict_by"]) == ("DROPPED", "approval_expired", "expiry")
    pipe.verdict(big, "approve", approver="alice", timestamp_ms=T0 + HOUR + 5)
    assert pipe.decisions(topics.APPROVED) == [d for d in pipe.decisions(topics.APPROVED)
                                               if d["request"]["action_id"] != big]
    assert pipe.verdicts()[-1]["note"] == "already expired by expiry"


def test_an_approve_that_arrives_after_the_expiry_expires_it_even_before_a_sweep() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    big = charge(pipe, 75_000, "k1")
    pipe.verdict(big, "approve", approver="alice", timestamp_ms=T0 + HOUR + 1)
    assert (pipe.decision_for(big)["outcome"], pipe.decision_for(big)["reason"]) == ("DROPPED", "approval_expired")


def test_a_replayed_request_does_not_reopen_a_released_hold() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    record = pipe.feed("charge_payment", {"card": "tok", "amount_cents": 75_000}, timestamp_ms=T0, key="k1")
    pipe.verdict(record["action_id"], "approve", approver="alice", timestamp_ms=T0 + 10)
    value = pipe.codec.encode("ActionRequested", record)
    partition = pipe.decision_for(record["action_id"])["hold_partition"]
    pipe.redeliver(Inbound(topics.REQUESTED, partition, 0, T0, b"k1", value))  # as after a crash
    pipe.verdict(record["action_id"], "approve", approver="bob", timestamp_ms=T0 + 30)
    assert [d["verdict_by"] for d in pipe.decisions(topics.APPROVED)] == ["alice"]
    assert pipe.verdicts()[-1]["note"] == "already released by alice"


def test_a_verdict_that_cannot_be_read_is_dead_lettered() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    pipe.process(Inbound(topics.APPROVALS, 0, 0, T0, b"x", b"not a verdict"))
    assert len(pipe.outputs[topics.DLQ]) == 1


def test_a_runtime_without_a_holds_table_refuses_a_policy_that_asks_for_approval() -> None:
    with pytest.raises(ConfigError, match="charge_payment, send_email ask for approval"):
        Pipeline(codec=Codec(), policies=POLICIES, partitions=6, keys=MemoryStore(), scopes=MemoryStore(),
                 metrics=StreamMetrics())


def test_the_waiting_gauges_count_holds_until_they_end() -> None:
    pipe = MemoryPipeline(policies=POLICIES)
    registry = pipe.pipeline.keys.metrics.registry
    waiting = lambda: registry.get_sample_value("runonce_holds_waiting")  # noqa: E731
    a_minute_ago = int(time.time() * 1000) - 60_000
    first, second = charge(pipe, 75_000, "k1", a_minute_ago), charge(pipe, 80_000, "k2", a_minute_ago)
    assert waiting() == 2 and 59 < registry.get_sample_value("runonce_hold_oldest_seconds") < 3600
    pipe.verdict(first, "approve", approver="alice", timestamp_ms=a_minute_ago + 10)
    pipe.verdict(second, "deny", approver="alice", timestamp_ms=a_minute_ago + 10)
    assert waiting() == 0 and registry.get_sample_value("runonce_hold_oldest_seconds") == 0
