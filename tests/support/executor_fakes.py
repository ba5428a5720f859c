"""Fakes for the executor's Kafka protocol, for tests without a broker: an injected consumer
and checkpoint that record every commit and abort, vendors that count every call (so a
second one is visible), and builders of approved records."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition

from runonce.connectors.executor.executor import Executor
from runonce.connectors.executor.lease import NO_LEASE, Lease
from runonce.connectors.executor.receipts import ChainHeads, Signing, chain_name
from runonce.connectors.executor.result_store import ResultStore
from runonce.connectors.executor.results import DEFAULT_WINDOW_MS, ResultIndex
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.core.decision import Decision, Origin, Outcome, Reason
from runonce.kafka import topics
from runonce.kafka.checkpoint import Failure
from runonce.kafka.positions import NO_OFFSET, StartPolicy
from runonce.kafka.receipts import Receipts
from runonce.receipts.chain import Head
from runonce.sdk.submit import build_request
from runonce.streams.records import decision_record
from runonce.telemetry.spans import Spans
from runonce.wire.codec import Codec
from runonce.wire.results import Result
from tests.support import kafka_fakes

T = topics.APPROVED


def tp(partition: int, offset: int = NO_OFFSET, error: KafkaError | None = None) -> Any:
    if error is not None:  # what committed() returns for a partition it could not look up
        return SimpleNamespace(topic=T, partition=partition, offset=offset, error=error)
    return TopicPartition(T, partition, offset)


class FakeConsumer:
    def __init__(self, committed: list[Any], watermarks: dict[int, tuple[int, int]] | None = None) -> None:
        self.committed_offsets = committed
        self.watermarks = watermarks or {}
        self.assigned: list[tuple[int, int]] = []
        self.seeks: list[tuple[int, int]] = []
        self.messages: list[Any] = []
        #: the offset after the last record consumed, per partition (none read: invalid)
        self.read_to: dict[int, int] = {}
        self.closed = False

    def committed(self, partitions: Any, timeout: float) -> list[Any]:
        if isinstance(self.committed_offsets, Exception):
            raise self.committed_offsets
        return self.committed_offsets

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        if partition.partition not in self.watermarks:  # as a leader that does not answer
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return self.watermarks[partition.partition]

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = [(p.partition, p.offset) for p in partitions]

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(T, p) for p, _ in self.assigned] or [TopicPartition(T, c.partition)
                                                                     for c in self.committed_offsets]

    def seek(self, partition: TopicPartition) -> None:
        self.seeks.append((partition.partition, partition.offset))

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition, self.read_to.get(p.partition, OFFSET_INVALID))
                for p in partitions]

    def subscribe(self, topics: list[str], on_assign: Any, on_revoke: Any) -> None:
        self.subscribed = topics

    def close(self) -> None:
        self.closed = True

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        taken, self.messages = self.messages[:num_messages], self.messages[num_messages:]
        for msg in taken:
            if msg.error() is None:
                self.read_to[msg.partition()] = msg.offset() + 1
        return taken


@dataclass
class FakeCheckpoint:
    answers: list[bool] = field(default_factory=list)
    commits: list[tuple[list[Any], dict[tuple[str, int], int]]] = field(default_factory=list)
    transactional_id: str = "runonce-exec-test-0"
    #: per (topic, partition): the next offset a record would get (committed or aborted)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)

    def commit(self, records: list[Any], offsets: dict[tuple[str, int], int], *, flush: bool = False,
               after_commit: Callable[[dict[tuple[str, int], int]], None] | None = None,
               abort: bool = False) -> Failure | None:
        """``answers``: True commits, False aborts (as ``Checkpoint.commit``: None or a Failure,
        and ``after_commit`` told each partition's end once committed)."""
        self.commits.append((list(records), dict(offsets)))
        written: dict[tuple[str, int], int] = {}
        for r in records:
            at = (r.topic, r.partition if r.partition is not None else 0)
            self.ends[at] = self.ends.get(at, 0) + 1
            written[at] = self.ends[at]
        for at in written:
            self.ends[at] += 1  # the commit or abort marker
        if abort or not (self.answers.pop(0) if self.answers else True):
            return Failure.ABORTABLE
        if after_commit is not None:
            after_commit(written)
        return None

    def close(self) -> None:
        pass


class LocalIndex(ResultIndex):
    """The results index on a real RocksDB store (a temporary folder), without a broker:
    ``restore`` only records what it was asked for."""

    def __init__(self, folder: Path | None = None) -> None:
        super().__init__("unused:9092", frozenset(), ResultStore(
            folder or Path(tempfile.mkdtemp(prefix="runonce-index-")), key_window_ms=DEFAULT_WINDOW_MS))
        self.restored: list[dict[int, int]] = []

    def put(self, action_id: str, vendor_key: str, outcome: Result) -> None:
        """A result committed earlier (its offsets are not this test's concern)."""
        self.learn([(action_id, vendor_key, outcome)], {})

    def restore(self, starts: Mapping[int, int]) -> int:
        self.restored.append(dict(starts))
        return 0


@dataclass
class Mailer:
    sent: list[str] = field(default_factory=list)
    name = "mailer"
    tools = frozenset({"send_email"})
    capability = Capability.NONE

    def perform(self, call: ActionCall) -> VendorResponse:
        self.sent.append(call.action_id)
        return VendorResponse(f"msg-{call.action_id}")


def executor(consumer: FakeConsumer, checkpoint: FakeCheckpoint | None = None,
             start: StartPolicy = StartPolicy.EARLIEST, connector: Mailer | None = None,
             spans: Spans | None = None, lease: Lease | None = None, receipts: Receipts | None = None,
             heads: ChainHeads | None = None) -> Executor:
    """``lease``: vendor calls start only while it holds (none: always). ``receipts`` and
    ``heads`` (both or neither): receipts on."""
    connector = connector or Mailer()
    return Executor(connector, consumer=consumer, checkpoint=checkpoint or FakeCheckpoint(),
                    index=LocalIndex(), start=start,
                    runner=ActionRunner(connector, RetryPolicy(base_backoff_s=0.0), sleep=lambda _s: None),
                    lease=lease or NO_LEASE, spans=spans,
                    signing=Signing(receipts, heads) if receipts is not None and heads is not None else None)


@dataclass
class KnownHeads:
    """Chain heads as a table (``heads``: partition -> head; a new chain where none), and each read."""

    heads: dict[int, Head] = field(default_factory=dict)
    group: str = "mailer"
    read: list[int] = field(default_factory=list)

    def head(self, partition: int) -> Head:
        self.read.append(partition)
        return self.heads.get(partition) or Head(chain_name(self.group, partition))

    def close(self) -> None:
        pass


class Msg(kafka_fakes.Msg):
    """A record of ``actions.approved`` (T), as the executor's consumer hands it over."""

    def __init__(self, partition: int, offset: int, value: bytes | None = None,
                 error: KafkaError | None = None, headers: list[tuple[str, bytes]] | None = None) -> None:
        super().__init__(T, partition, offset, None, value, _error=error, _headers=headers)

def approved(action_id: str, tool: str = "send_email") -> bytes:
    request = build_request(tool, {"to": "x@y"}, agent_id="a", action_id=action_id)
    record = decision_record(request, Decision(Outcome.APPROVE, Reason.UNIQUE), dedup_key=None,
                             content_hash="h", unkeyed=True, origin=Origin(0, 0, 0))
    return Codec().encode("ActionDecision", record)


@dataclass
class KeyedVendor:
    """Deduplicates on the vendor key, and counts every call (so a second one is visible)."""

    calls: list[str] = field(default_factory=list)
    effects: dict[str, str] = field(default_factory=dict)
    name = "payments"
    tools = frozenset({"send_email"})
    capability = Capability.VENDOR_KEY

    def perform(self, call: ActionCall) -> VendorResponse:
        self.calls.append(call.vendor_key)
        return VendorResponse(self.effects.setdefault(call.vendor_key, f"ch-{len(self.effects)}"))


@dataclass
class CheckedVendor(KeyedVendor):
    """Deduplicates nothing, but can be asked whether an effect exists (jira's label search)."""

    checks: list[str] = field(default_factory=list)
    name = "jira"
    capability = Capability.STATE_CHECK
    check_lag_s = 0.0
    timeout_s = 1.0

    def perform(self, call: ActionCall) -> VendorResponse:
        self.calls.append(call.vendor_key)
        ref = f"SUP-{len(self.calls)}"
        self.effects[call.vendor_key + f"#{len(self.calls)}"] = ref
        return VendorResponse(ref)

    def check(self, call: ActionCall) -> VendorResponse | None:
        self.checks.append(call.vendor_key)
        found = [ref for k, ref in self.effects.items() if k.startswith(call.vendor_key + "#")]
        return VendorResponse(found[0]) if found else None
