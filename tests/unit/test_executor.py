"""The executor's Kafka protocol without a broker: an injected consumer and checkpoint.

Where it starts reading (never a position the client picks), what it does after an aborted
transaction (back to the committed offsets, never a guess), and which commits carry what."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from runonce.connectors.executor.executor import Executor, Limits
from runonce.connectors.executor.lease import Lease
from runonce.connectors.executor.result_store import IndexEntry
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall, VendorResponse
from runonce.core.decision import Decision, Origin, Outcome, Reason
from runonce.kafka import topics
from runonce.kafka.positions import (
    NO_OFFSET,
    Committed,
    StartPolicy,
    UnknownPosition,
    rewind_positions,
    start_positions,
)
from runonce.kafka.process import Membership, consumer_settings
from runonce.sdk.submit import build_request
from runonce.streams.records import decision_record
from runonce.wire.codec import Codec
from runonce.wire.headers import H_ERROR_TYPE
from runonce.wire.results import Result, Status
from tests.support.executor_fakes import (
    CheckedVendor,
    FakeCheckpoint,
    FakeConsumer,
    KeyedVendor,
    LocalIndex,
    Mailer,
    Msg,
    T,
    approved,
    executor,
    tp,
)

# -- where it starts ---------------------------------------------------------------------

def test_the_client_never_picks_a_position() -> None:
    assert consumer_settings("127.0.0.1:9", "g-0", Membership("g", 30_000, True))["auto.offset.reset"] == "error"


def test_a_static_member_joins_as_its_transactional_id() -> None:
    """A restarted slot rejoins as the instance it replaces, so the broker hands its partitions
    back at once rather than after the killed process's session timeout (bench/executor_restart.py
    --kill measures it); a process that is not static leaves its group on a clean stop."""
    assert consumer_settings("127.0.0.1:9", "g-0", Membership("g", 30_000, True))["group.instance.id"] == "g-0"
    assert "group.instance.id" not in consumer_settings("127.0.0.1:9", "g-0", Membership("g", 30_000, False))


def test_committed_offsets_always_win_whatever_the_policy() -> None:
    committed = [Committed(0, 120), Committed(1, 0)]
    for policy in StartPolicy:
        starts = start_positions(committed, {}, policy)
        assert [(s.partition, s.offset, s.decided) for s in starts] == [(0, 120, False), (1, 0, False)]


def test_a_new_group_starts_where_its_policy_says_and_says_so() -> None:
    committed = [Committed(0, 120), Committed(1, NO_OFFSET)]
    earliest = start_positions(committed, {1: (3, 40)}, StartPolicy.EARLIEST)
    end = start_positions(committed, {1: (3, 40)}, StartPolicy.END)
    assert (earliest[1].offset, earliest[1].decided, end[1].offset) == (3, True, 40)
    assert "earliest" in earliest[1].why and "end" in end[1].why


@pytest.mark.parametrize("bad", [Committed(1, 5, error="COORDINATOR_NOT_AVAILABLE"), Committed(1, -1)])
def test_an_offset_that_could_not_be_read_is_unknown(bad: Committed) -> None:
    with pytest.raises(UnknownPosition, match="partition 1"):
        start_positions([Committed(0, 120), bad], {1: (0, 40)}, StartPolicy.EARLIEST)


def test_assignment_starts_every_partition_at_an_explicit_offset_and_commits_a_decided_start() -> None:
    consumer = FakeConsumer([tp(0, 120), tp(1)], watermarks={1: (7, 40)})
    checkpoint = FakeCheckpoint()
    ex = executor(consumer, checkpoint, start=StartPolicy.END)
    ex.on_assign(consumer, [TopicPartition(T, 0), TopicPartition(T, 1)])
    assert consumer.assigned == [(0, 120), (1, 40)]
    ex.step()  # idle: the decided start is committed, so no later owner decides again
    assert checkpoint.commits == [([], {(T, 1): 40})]


@pytest.mark.parametrize("committed", [
    [tp(0, 120), tp(1, 5, error=KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE))],
    KafkaException(KafkaError(KafkaError._TIMED_OUT)),
])
def test_assignment_with_an_unknown_position_exits_for_a_restart(committed: Any) -> None:
    consumer = FakeConsumer(committed)
    with pytest.raises(UnknownPosition):
        executor(consumer).on_assign(consumer, [TopicPartition(T, 0), TopicPartition(T, 1)])
    assert consumer.assigned == []


def test_an_offset_reset_from_the_client_is_an_exit_not_a_new_position() -> None:
    consumer = FakeConsumer([tp(0, 120)])
    consumer.messages = [Msg(0, 0, error=KafkaError(KafkaError._AUTO_OFFSET_RESET, "offset out of range"))]
    with pytest.raises(UnknownPosition, match="out of range"):
        executor(consumer).step()


# -- after an abort ----------------------------------------------------------------------

def test_rewind_seeks_to_the_committed_offsets() -> None:
    consumer = FakeConsumer([tp(0, 120), tp(1, 7)])
    ex = executor(consumer)
    ex.offsets.pending = {(T, 0): 9}
    ex.rewind_to_committed()
    assert consumer.seeks == [(0, 120), (1, 7)] and ex.offsets.pending == {}


@pytest.mark.parametrize("bad", [tp(1), tp(1, 5, error=KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE))])
def test_rewind_never_guesses_a_position(bad: Any) -> None:
    consumer = FakeConsumer([tp(0, 120), bad])
    with pytest.raises(UnknownPosition, match="cannot rewind"):
        executor(consumer).rewind_to_committed()
    assert consumer.seeks == []  # no partition moved, least of all to offset 0


def test_rewind_returns_to_a_start_it_decided_but_could_not_commit_yet() -> None:
    consumer = FakeConsumer([tp(0)], watermarks={0: (0, 40)})
    ex = executor(consumer, FakeCheckpoint(answers=[False]), start=StartPolicy.END)
    ex.on_assign(consumer, [TopicPartition(T, 0)])
    consumer.committed_offsets = [tp(0)]  # the abort left the group without an offset
    consumer.messages = [Msg(0, 40, approved("a1"))]
    ex.step()  # the intent transaction aborts
    assert consumer.seeks == [(0, 40)] and ex.offsets.pending == {(T, 0): 40}


def test_rewind_positions_shared_by_every_transactional_consumer() -> None:
    # The stream worker rewinds with the same rule: committed first, then its own decided start.
    starts = rewind_positions([Committed(0, 120), Committed(1, NO_OFFSET)], {1: 3, 2: 9})
    assert [(s.partition, s.offset, s.decided) for s in starts] == [(0, 120, False), (1, 3, True)]
    with pytest.raises(UnknownPosition, match="partition 1: no committed offset"):
        rewind_positions([Committed(0, 120), Committed(1, NO_OFFSET)], {})


# -- the commits -------------------------------------------------------------------------

def test_intent_then_result_each_with_the_offsets_it_owns() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    mailer = Mailer()
    ex = executor(consumer, checkpoint, connector=mailer)
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    (intent, intent_offsets), (result, result_offsets) = checkpoint.commits
    codec = Codec()
    assert codec.decode(intent[0].value, expect="ActionResult")[1]["status"] == "attempting"
    assert codec.decode(result[0].value, expect="ActionResult")[1]["status"] == "succeeded"
    assert (intent_offsets, result_offsets) == ({(T, 0): 3}, {(T, 0): 4}) and mailer.sent == ["a1"]


def test_an_aborted_intent_performs_nothing() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    mailer = Mailer()
    ex = executor(consumer, FakeCheckpoint(answers=[False]), connector=mailer)
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    assert mailer.sent == [] and consumer.seeks == [(0, 3)]


def test_a_record_no_decision_is_dead_lettered_with_its_offset() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    consumer.messages = [Msg(0, 3, b"not avro")]
    executor(consumer, checkpoint).step()
    (records, offsets), = checkpoint.commits
    assert records[0].topic == topics.DLQ and offsets == {(T, 0): 4}
    assert dict(records[0].headers)[H_ERROR_TYPE] == b"decode_error"


def test_redelivered_result_is_not_performed_again() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    mailer = Mailer()
    ex = executor(consumer, connector=mailer)
    ex.index.put("a1", "a1", Result(Status.SUCCEEDED, "msg-a1"))
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    assert mailer.sent == [] and ex.offsets.pending == {(T, 0): 4}


# -- an abort never forgets an intent -----------------------------------------------------

def _statuses(checkpoint: FakeCheckpoint) -> list[str]:
    codec = Codec()
    return [codec.decode(records[0].value, expect="ActionResult")[1]["status"]
            for records, _ in checkpoint.commits if records]


def _last_result(checkpoint: FakeCheckpoint) -> dict[str, Any]:
    records, offsets = checkpoint.commits[-1]
    return {**Codec().decode(records[0].value, expect="ActionResult")[1], "offsets": offsets}


def test_an_aborted_result_commit_commits_the_seen_outcome_and_calls_no_one() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint(answers=[True, False])  # intent commits, the result aborts
    mailer = Mailer()
    ex = executor(consumer, checkpoint, connector=mailer)
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    assert consumer.seeks == [(0, 3)]
    consumer.messages = [Msg(0, 3, approved("a1"))]  # redelivered after the rewind
    ex.step()
    assert mailer.sent == ["a1"]
    last = _last_result(checkpoint)
    assert (last["status"], last["vendor_ref"], last["offsets"]) == ("succeeded", "msg-a1", {(T, 0): 4})
    assert ex.uncommitted == {}


@pytest.mark.parametrize("vendor, status, performs, checks", [
    (Mailer, "in_doubt", 1, 0),            # smtp/slack: cannot tell, never resent
    (KeyedVendor, "succeeded", 2, 0),      # payments: one more call, the same key, one effect
    (CheckedVendor, "succeeded", 1, 1),    # jira: asked, found, no second ticket
])
def test_after_an_aborted_result_commit_and_a_revoke_the_redelivery_reconciles_by_capability(
        vendor: type, status: str, performs: int, checks: int) -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint(answers=[True, False])
    connector = vendor()
    ex = executor(consumer, checkpoint, connector=connector)
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    ex.on_revoke(consumer, [TopicPartition(T, 0)])  # what this process saw is no longer the truth
    ex.on_assign(consumer, [TopicPartition(T, 0)])
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    calls = connector.sent if isinstance(connector, Mailer) else connector.calls
    assert len(calls) == performs and len(set(calls)) == 1
    assert len(getattr(connector, "checks", [])) == checks
    if not isinstance(connector, Mailer):
        assert len(set(connector.effects.values())) == 1  # one effect
    # the aborted result, then the reconciled one; no second intent: the first was remembered
    assert _statuses(checkpoint) == ["attempting", "succeeded", status]
    assert _last_result(checkpoint)["offsets"] == {(T, 0): 4}


def test_an_aborted_intent_commit_performs_once_on_redelivery() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint(answers=[False])
    mailer = Mailer()
    ex = executor(consumer, checkpoint, connector=mailer)
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    consumer.messages = [Msg(0, 3, approved("a1"))]  # redelivered after the rewind
    ex.step()
    assert mailer.sent == ["a1"] and _statuses(checkpoint) == ["attempting", "attempting", "succeeded"]


# -- a vendor call starts only while ownership is proven (lease.py) -------------------------

@dataclass
class SlowMailer(Mailer):
    """Each send takes ``took_s`` on the lease's clock."""

    now: list[float] = field(default_factory=lambda: [0.0])
    took_s: float = 10.0

    def perform(self, call: ActionCall) -> VendorResponse:
        self.now[0] += self.took_s
        return super().perform(call)


def _second_call_lapses() -> tuple[FakeConsumer, FakeCheckpoint, SlowMailer, Executor]:
    """Two emails in one batch, one call at a time, the first 10 s on the lease's clock against
    a 5 s lease: after the batch, only the first is sent."""
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    mailer = SlowMailer()
    ex = executor(consumer, checkpoint, connector=mailer, lease=Lease(5.0, clock=lambda: mailer.now[0]))
    ex.limits = Limits(max_in_flight=1)
    consumer.messages = [Msg(0, 3, approved("a1")), Msg(0, 4, approved("a2"))]
    ex.step()
    assert mailer.sent == ["a1"]
    return consumer, checkpoint, mailer, ex


def test_a_call_the_lease_no_longer_covers_never_starts_and_its_record_comes_again() -> None:
    """Two emails in one batch, one call at a time; the first takes longer than the lease (5 s
    from the intents' commit). The second is not sent: its result is not committed, the
    offsets stop before it, and its redelivery to this process sends it (an intent whose call
    never started is not in doubt). Catches: the lease check gone (both sent in the first
    batch), the offsets committed past the unsent record, the unstarted memory gone (the
    redelivery reconciles: SMTP cannot tell, so it would be in_doubt, never sent)."""
    consumer, checkpoint, mailer, ex = _second_call_lapses()
    assert _last_result(checkpoint)["offsets"] == {(T, 0): 4}  # a2's record comes again
    consumer.messages = [Msg(0, 4, approved("a2"))]
    ex.step()
    assert mailer.sent == ["a1", "a2"]
    last = _last_result(checkpoint)
    assert (last["action_id"], last["status"], last["offsets"]) == ("a2", "succeeded", {(T, 0): 5})


def _results(checkpoint: FakeCheckpoint) -> list[dict[str, Any]]:
    codec = Codec()
    return [codec.decode(r.value, expect="ActionResult")[1] for records, _ in checkpoint.commits for r in records]


def test_a_call_the_lease_did_not_cover_is_withdrawn_and_its_next_owner_sends_it() -> None:
    """As above, the second email's call never starts. Its intent is withdrawn in the result
    transaction (an ``attempting`` record that says so), and a *next owner* (another executor:
    none of this one's memory, only what actions.results says) sends it. Catches: no withdrawn
    record (the heir finds an intent without a result; SMTP cannot be asked: in_doubt, never
    sent: 180-213 emails of a rolling restart), or no rewind after the lapse (this process reads on
    past the record; only a restart would bring it back)."""
    consumer, checkpoint, mailer, ex = _second_call_lapses()
    withdrawn = [r for r in _results(checkpoint) if r["action_id"] == "a2"][-1]
    assert withdrawn["status"] == "attempting" and withdrawn["error"].startswith("withdrawn: the call never started")
    assert consumer.seeks == [(0, 3)], "the consumer did not go back to its committed offsets (the fake's: 3)"
    heir_consumer = FakeConsumer([tp(0, 4)])
    heir_checkpoint = FakeCheckpoint()
    heir = executor(heir_consumer, heir_checkpoint, connector=mailer, lease=Lease(5.0, clock=lambda: mailer.now[0]))
    heir.index = ex.index  # what actions.results holds, as the heir's restore reads it
    heir_consumer.messages = [Msg(0, 4, approved("a2"))]
    heir.step()
    assert mailer.sent == ["a1", "a2"]
    assert _last_result(heir_checkpoint)["status"] == "succeeded"


@dataclass
class RenewingCheckpoint(FakeCheckpoint):
    """Tells each proving commit (offsets alone) to whoever waits for one."""

    renewed: threading.Event = field(default_factory=threading.Event)

    def commit(self, records: list[Any], offsets: dict[tuple[str, int], int], **kwargs: Any) -> Any:
        answer = super().commit(records, offsets, **kwargs)
        if not records:
            self.renewed.set()
        return answer


def test_a_healthy_executors_lease_is_renewed_while_a_slow_batch_runs() -> None:
    """Four emails, one at a time, each 3 s on the lease's clock against a 5 s lease: the batch
    takes 12 s. Each send returns once a proving commit renewed the lease (or after 10 s of
    waiting for one), so all four start and none lapses. Catches: no renewal while calls run
    (the third starts at 6 s > 5 s: it lapses, as the email executor's did every 5.5 s)."""
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = RenewingCheckpoint()
    now = [0.0]

    @dataclass
    class Slow(Mailer):
        def perform(self, call: ActionCall) -> VendorResponse:
            now[0] += 3.0
            checkpoint.renewed.wait(10)
            checkpoint.renewed.clear()
            return super().perform(call)

    mailer = Slow()
    ex = executor(consumer, checkpoint, connector=mailer, lease=Lease(5.0, clock=lambda: now[0]))
    ex.limits = Limits(max_in_flight=1)
    consumer.messages = [Msg(0, 3 + i, approved(f"a{i}")) for i in range(4)]
    ex.step()
    assert mailer.sent == ["a0", "a1", "a2", "a3"]
    assert not [r for r in _results(checkpoint) if r["error"]], "a call lapsed"
    assert _last_result(checkpoint)["offsets"] == {(T, 0): 7}


def test_a_stop_starts_no_further_call_and_withdraws_the_rest() -> None:
    """SIGTERM while the first of three emails is being sent (the loop's stop, as its handler
    calls it): the first finishes and commits; the other two never start, are withdrawn, and
    the offsets stop before them, so the next owner sends them. Catches: a stop that lets the
    batch run on (the stopping process sends all three, past a grace period a kubelet keeps),
    or that leaves them as intents (the heir: in doubt)."""
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    ex: Executor

    @dataclass
    class Stopped(Mailer):
        def perform(self, call: ActionCall) -> VendorResponse:
            if call.action_id == "a0":
                ex.loop.stop()
            return super().perform(call)

    mailer = Stopped()
    ex = executor(consumer, checkpoint, connector=mailer, lease=Lease(5.0, clock=lambda: 0.0))
    ex.limits = Limits(max_in_flight=1)
    consumer.messages = [Msg(0, 3 + i, approved(f"a{i}")) for i in range(3)]
    ex.step()
    assert mailer.sent == ["a0"]
    last = {r["action_id"]: r for r in _results(checkpoint)[-3:]}
    assert last["a0"]["status"] == "succeeded"
    assert [last[a]["error"].startswith("withdrawn") for a in ("a1", "a2")] == [True, True]
    assert "stopping" in last["a1"]["error"]
    assert checkpoint.commits[-1][1] == {(T, 0): 4}


def test_a_reconcile_after_the_lease_ended_proves_ownership_with_a_commit_first() -> None:
    """A redelivered intent (no new action, so no intent to commit) long after the last commit:
    the executor commits the batch's first offsets before it calls (a commit only a current
    member can make), then reconciles. Catches the proving commit left out (the call never
    starts, and the record comes again forever)."""
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    vendor = KeyedVendor()
    now = [100.0]
    ex = executor(consumer, checkpoint, connector=vendor, lease=Lease(5.0, clock=lambda: now[0]))
    ex.index.put("a1", "k1", Result(Status.ATTEMPTING))
    consumer.messages = [Msg(0, 3, approved_keyed("a1", "k1"))]
    ex.step()
    (proof, proof_offsets), (result, _) = checkpoint.commits
    assert (proof, proof_offsets) == ([], {(T, 0): 3})
    assert len(vendor.calls) == 1 and _last_result(checkpoint)["status"] == "succeeded"


def test_a_vendors_5_mb_error_page_still_makes_a_result_that_fits() -> None:
    from runonce.connectors.toolkit.errors import PermanentVendorError

    class Huge(Mailer):
        def perform(self, call: ActionCall) -> VendorResponse:
            raise PermanentVendorError("HTTP 400: " + "<html>" * 1_000_000)

    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    consumer.messages = [Msg(0, 3, approved("a1"))]
    executor(consumer, checkpoint, connector=Huge()).step()
    (result, _), = [c for c in checkpoint.commits if c[0]][1:]
    limit = int(next(s for s in topics.TOPICS if s.name == topics.RESULTS).configs["max.message.bytes"])
    assert _last_result(checkpoint)["status"] == "failed" and len(result[0].value) < limit // 100


# -- batches -----------------------------------------------------------------------------

def approved_keyed(action_id: str, key: str) -> bytes:
    request = build_request("send_email", {"to": "x@y"}, agent_id="a", action_id=action_id, idempotency_key=key)
    record = decision_record(request, Decision(Outcome.APPROVE, Reason.UNIQUE), dedup_key=key,
                             content_hash="h", unkeyed=False, origin=Origin(0, 0, 0))
    return Codec().encode("ActionDecision", record)


def test_a_batch_is_one_intent_and_one_result_transaction_with_the_offsets_each_owns() -> None:
    consumer = FakeConsumer([tp(0, 3), tp(1, 8)])
    checkpoint = FakeCheckpoint()
    vendor = KeyedVendor()
    ex = executor(consumer, checkpoint, connector=vendor)  # type: ignore[arg-type]
    consumer.messages = [Msg(0, 3, approved("a1")), Msg(1, 8, approved("b1")), Msg(0, 4, approved("a2")),
                         Msg(0, 5, approved("other", tool="charge_payment")), Msg(1, 9, b"not avro")]
    ex.step()
    (intents, intent_offsets), (results, result_offsets) = checkpoint.commits
    codec = Codec()
    assert [codec.decode(r.value, expect="ActionResult")[1]["action_id"] for r in intents] == ["a1", "b1", "a2"]
    assert intent_offsets == {(T, 0): 3, (T, 1): 8}  # the batch's first records: redelivered after a crash
    assert [r.topic for r in results] == [topics.RESULTS] * 3 + [topics.DLQ]
    assert result_offsets == {(T, 0): 6, (T, 1): 10}
    assert sorted(vendor.calls) == ["a1", "a2", "b1"]


def test_two_actions_with_one_vendor_key_are_never_in_one_batch() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    vendor = CheckedVendor()  # deduplicates nothing: a second call would be a second ticket
    ex = executor(consumer, checkpoint, connector=vendor)  # type: ignore[arg-type]
    consumer.messages = [Msg(0, 3, approved_keyed("a1", "k")), Msg(0, 4, approved_keyed("a2", "k"))]
    ex.step()
    assert vendor.calls == ["k"] and [m.offset() for m in ex.loop.deferred] == [4]
    ex.step()  # the held record, planned against a1's committed result
    assert vendor.calls == ["k"] and ex.loop.deferred == []
    (results, offsets) = checkpoint.commits[-1]
    blocked = Codec().decode(results[0].value, expect="ActionResult")[1]
    assert (blocked["action_id"], blocked["status"]) == ("a2", "succeeded") and "duplicate of action a1" in blocked["error"]
    assert offsets == {(T, 0): 5}


def test_an_aborted_batch_result_commits_every_seen_outcome_and_calls_no_one_again() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    vendor = KeyedVendor()  # a call again would be counted, even where the vendor deduplicates
    ex = executor(consumer, FakeCheckpoint(answers=[True, False]), connector=vendor)  # type: ignore[arg-type]
    batch = [Msg(0, 3, approved("a1")), Msg(0, 4, approved("a2")), Msg(0, 5, approved("a3"))]
    consumer.messages = list(batch)
    ex.step()  # intents commit, the results' transaction aborts
    assert consumer.seeks == [(0, 3)] and set(ex.uncommitted) == {"a1", "a2", "a3"}
    consumer.messages = list(batch)  # redelivered from the committed offset
    ex.step()
    assert sorted(vendor.calls) == ["a1", "a2", "a3"] and ex.uncommitted == {}
    assert {a: getattr(ex.index.result(a), "status", None) for a in ("a1", "a2", "a3")} == \
        {a: Status.SUCCEEDED for a in ("a1", "a2", "a3")}


def test_vendor_calls_of_a_batch_are_in_flight_together() -> None:
    import threading

    together = threading.Barrier(3, timeout=5)

    @dataclass
    class Slow(KeyedVendor):
        def perform(self, call: ActionCall) -> VendorResponse:
            together.wait()  # answers only once three calls are in flight at once
            return super().perform(call)

    consumer = FakeConsumer([tp(0, 0)])
    vendor = Slow()
    connector: Any = vendor
    ex = Executor(connector, consumer=consumer, checkpoint=FakeCheckpoint(), index=LocalIndex(),
                  runner=ActionRunner(connector, RetryPolicy(max_attempts=1), sleep=lambda _s: None),
                  limits=Limits(max_in_flight=4))
    consumer.messages = [Msg(0, i, approved(f"a{i}")) for i in range(3)]
    ex.step()
    assert sorted(vendor.calls) == ["a0", "a1", "a2"]


# -- the marker table's bound ------------------------------------------------------------

@dataclass
class MarkedMailer(Mailer):
    """A connector keeping markers of its own (as the postgres kind does)."""

    pruned: list[int] | None = None

    def prune(self, older_than_ms: int) -> int:
        assert self.pruned is not None
        self.pruned.append(older_than_ms)
        return 0


def test_an_idle_executor_prunes_markers_older_than_the_window_every_ten_minutes() -> None:
    from runonce.connectors.executor.upkeep import PRUNE_EVERY_S, Upkeep

    connector = MarkedMailer(pruned=[])
    now = [1000.0]
    consumer = FakeConsumer([tp(0, 5)], watermarks={0: (0, 5)})
    index = LocalIndex()
    ex = Executor(connector, consumer=consumer, checkpoint=FakeCheckpoint(), index=index,
                  runner=ActionRunner(connector, RetryPolicy(base_backoff_s=0.0), sleep=lambda _s: None),
                  upkeep=Upkeep("t", consumer, T, index, connector, prune_window_ms=86_400_000, clock=lambda: now[0]))
    ex.on_assign(consumer, [TopicPartition(T, 0)])
    ex.step()  # idle and caught up (started at the end): the first turn prunes
    now[0] += PRUNE_EVERY_S - 1
    ex.step()  # too soon
    now[0] += 2
    ex.step()
    assert connector.pruned == [86_400_000, 86_400_000]


def test_an_intent_older_than_the_window_outlives_an_idle_turn_while_its_approval_is_unread() -> None:
    """Idle is not caught up: right after an assignment the first fetch may not have arrived.
    An email approved three days ago whose executor died after its intent must meet that
    intent when its record arrives, not an index pruned meanwhile (CI, stop 53: it was sent)."""
    connector = Mailer()
    consumer = FakeConsumer([tp(0, 0)], watermarks={0: (0, 1)})
    index = LocalIndex()
    ex = Executor(connector, consumer=consumer, checkpoint=FakeCheckpoint(), index=index,
                  runner=ActionRunner(connector, RetryPolicy(base_backoff_s=0.0), sleep=lambda _s: None))
    three_days_ago_ms = int(time.time() * 1000) - 3 * 86_400_000
    index.store.write([IndexEntry("old", "old", Result(Status.ATTEMPTING), three_days_ago_ms)], {})
    ex.on_assign(consumer, [TopicPartition(T, 0)])
    ex.step()  # nothing fetched yet: an idle turn
    assert index.result("old") is not None
    consumer.messages = [Msg(0, 0, approved("old"))]
    ex.step()
    assert connector.sent == []


def test_a_paced_vendors_batch_fits_in_half_a_lease() -> None:
    """Catches a batch a vendor's own pace cannot start within the lease (50/s, 5 s: 500 records
    would take 10 s; every batch would end early and come again)."""
    from runonce.connectors.executor.executor import paced_batch
    from runonce.rate import Rate

    lease = Lease.of_session(10_000)
    assert paced_batch(500, Rate(per_s=50.0), lease) == 125
    assert paced_batch(500, Rate(), lease) == 500  # no pace of ours: the setting
    assert paced_batch(500, Rate(per_s=0.1), lease) == 1
