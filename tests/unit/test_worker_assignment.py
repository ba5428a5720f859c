"""The stream worker's assignment, with fakes (a consumer and a changelog reader that record
what they are asked, real RocksDB tables): under KIP-848 (``RUNONCE_GROUP_PROTOCOL=consumer``)
a worker is given and relieved of partitions a few at a time. It restores only the state
partitions it is given, keeps the rest open and working, and closes what is taken at once (a
scope partition left open here would be decided in place by stage 2 while its next owner
decides it too). A classic group hands over the whole assignment each time."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runonce.core.policy import PolicyBook
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.kafka.process import GroupProtocol
from runonce.kafka.watchdog import Watchdog
from runonce.sdk.submit import build_request
from runonce.settings import Settings
from runonce.streams.transactional import worker as worker_module
from runonce.streams.transactional.worker import INPUTS, TransactionalWorker
from runonce.wire.codec import Codec
from tests.support.kafka_fakes import FakeProducer, Made, Msg

COMMITTED = 5


class Consumer:
    """Every partition committed at ``COMMITTED``; records what it was told to assign."""

    def __init__(self) -> None:
        self.assigned: list[tuple[str, list[tuple[str, int, int]]]] = []
        self.paused: set[tuple[str, int]] = set()
        self.resumed: set[tuple[str, int]] = set()
        self.seeks: list[tuple[str, int, int]] = []

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, COMMITTED) for tp in partitions]

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned.append(("assign", sorted((tp.topic, tp.partition, tp.offset) for tp in partitions)))

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned.append(("incremental", sorted((tp.topic, tp.partition, tp.offset) for tp in partitions)))

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in partitions}

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in partitions}
        self.resumed |= {(tp.topic, tp.partition) for tp in partitions}

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.topic, tp.partition, tp.offset))

    def consumer_group_metadata(self) -> str:
        return "group-metadata"


class Reader:
    """Changelogs (``logs``, empty unless given) and receipt chains with nothing in them: notes
    each partition whose restore (or whose chain's head) was begun."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []
        self.logs: dict[tuple[str, int], list[tuple[bytes, bytes]]] = {}
        #: the most records a fetch brings (a real one is bounded by bytes)
        self.per_fetch = 10
        self._at: tuple[str, int, int] | None = None

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        self.asked.append((tp.topic, tp.partition))
        return 0, len(self.logs.get((tp.topic, tp.partition), []))

    def assign(self, partitions: list[TopicPartition]) -> None:
        tp = partitions[0]
        self._at = (tp.topic, tp.partition, tp.offset)

    def consume(self, n: int, timeout: float) -> list[Msg]:
        assert self._at is not None
        topic, partition, at = self._at
        records = self.logs.get((topic, partition), [])[at:at + min(n, self.per_fetch)]
        self._at = (topic, partition, at + len(records))
        return [Msg(topic, partition, at + i, key, value) for i, (key, value) in enumerate(records)]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        assert self._at is not None
        return [TopicPartition(self._at[0], self._at[1], self._at[2])]

    def unassign(self) -> None:
        self._at = None


def given(*partitions: int) -> list[TopicPartition]:
    """Partition p of every input: what the range assignor keeps together."""
    return [TopicPartition(topic, p) for p in partitions for topic in INPUTS]


def worker(tmp_path: Path, protocol: GroupProtocol) -> tuple[TransactionalWorker, Consumer, Reader]:
    consumer, reader = Consumer(), Reader()
    key = tmp_path / "receipts.key"
    key.write_bytes(Ed25519PrivateKey.generate().private_bytes_raw())
    settings = Settings(home=tmp_path, bootstrap="127.0.0.1:9", group_protocol=protocol, receipts_key_file=key)
    w = TransactionalWorker(settings, PolicyBook.load(), consumer=consumer, reader=reader,  # type: ignore[arg-type]
                            new_producer=Made(FakeProducer()), watchdog=Watchdog("t", 60, start=False))
    return w, consumer, reader


def open_parts(w: TransactionalWorker) -> dict[str, list[int]]:
    return {table.name: sorted(table.parts) for table in w.tables}


def restored(reader: Reader) -> list[tuple[str, int]]:
    done, reader.asked = sorted(reader.asked), []
    return done


def test_under_kip_848_a_worker_restores_what_it_is_given_and_closes_what_is_taken(tmp_path: Path) -> None:
    w, consumer, reader = worker(tmp_path, GroupProtocol.CONSUMER)
    w.on_assign(consumer, given(0, 1, 2))
    assert open_parts(w) == {"keys": [0, 1, 2], "scopes": [0, 1, 2], "holds": [0, 1, 2]}
    restored(reader)

    w.on_assign(consumer, given(3))  # the others stay as they are: neither closed nor read again
    assert open_parts(w) == {"keys": [0, 1, 2, 3], "scopes": [0, 1, 2, 3], "holds": [0, 1, 2, 3]}
    assert restored(reader) == sorted([(topics.CHANGELOG_KEYS, 3), (topics.CHANGELOG_SCOPES, 3),
                                       (topics.CHANGELOG_HOLDS, 3), (topics.RECEIPTS, 3)])
    assert consumer.assigned[-1] == ("incremental", sorted((t, 3, COMMITTED) for t in INPUTS))

    w.on_revoke(consumer, given(1))
    assert open_parts(w) == {"keys": [0, 2, 3], "scopes": [0, 2, 3], "holds": [0, 2, 3]}
    here = w.pipeline.keys.decides_scope_here  # stage 2 in place: only where the scope partition is this worker's
    assert not here(1) and here(2)
    assert sorted(w.starts) == sorted((t, p) for p in (0, 2, 3) for t in INPUTS)
    assert w.receipts is not None and sorted(w.receipts.committed) == [0, 2, 3]  # chain 1 is its next owner's


def test_a_classic_group_hands_over_the_whole_assignment_each_time(tmp_path: Path) -> None:
    w, consumer, reader = worker(tmp_path, GroupProtocol.CLASSIC)
    w.on_assign(consumer, given(0, 1, 2))
    w.on_revoke(consumer, given(0, 1, 2))
    assert w.receipts is not None and not w.receipts.committed
    restored(reader)
    w.on_assign(consumer, given(1, 3))
    assert open_parts(w) == {"keys": [1, 3], "scopes": [1, 3], "holds": [1, 3]}
    # each given is caught up, and each chain's head read again: between two assignments of a
    # classic group, another member may have owned it (this one dropped from the group meanwhile)
    assert restored(reader) == sorted((log, p) for p in (1, 3) for log in (
        topics.CHANGELOG_KEYS, topics.CHANGELOG_SCOPES, topics.CHANGELOG_HOLDS, topics.RECEIPTS))
    assert w.receipts is not None and sorted(w.receipts.committed) == [1, 3]
    assert consumer.assigned[-1] == ("assign", sorted((t, p, COMMITTED) for p in (1, 3) for t in INPUTS))


def request_on(partition: int, offset: int) -> Msg:
    """An actions.requested record whose key is partition ``partition``'s."""
    i = 0
    while partition_for(f"key-{i}".encode(), 6) != partition:
        i += 1
    record = build_request("update_salesforce_field", {"record_id": f"r{i}", "field": "f", "value": i},
                           agent_id="a", idempotency_key=f"key-{i}")
    return Msg(topics.REQUESTED, partition, offset, f"key-{i}".encode(), Codec().encode("ActionRequested", record),
               1_800_000_000_000)


def test_a_short_restore_is_done_in_the_assignment_and_pauses_nothing(tmp_path: Path) -> None:
    w, consumer, reader = worker(tmp_path, GroupProtocol.CONSUMER)
    reader.logs[(topics.CHANGELOG_KEYS, 1)] = [(f"claim-{i}".encode(), b"{}") for i in range(30)]
    w.on_assign(consumer, given(0, 1))
    assert not consumer.paused and not w.restoring
    assert len(list(w.keys.parts[1].scan(None, 100))) == 30


def test_a_partition_given_waits_paused_while_its_state_is_restored_and_the_others_are_decided(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "RESTORE_AT_ONCE_S", 0.0)  # a fetch, no more: a long restore's start
    w, consumer, reader = worker(tmp_path, GroupProtocol.CONSUMER)
    reader.logs[(topics.CHANGELOG_KEYS, 1)] = [(f"claim-{i}".encode(), b"{}") for i in range(30)]
    w.loop.health.started()
    w.loop._on_assign(consumer, given(0, 1))  # noqa: SLF001  # the consumer's callback, through the loop
    assert consumer.paused == {(t, 1) for t in INPUTS}  # its every input, until its state is current
    assert "restoring the state of 1 partition (the others are decided" in w.loop.health.ready().reason
    consumer.resumed.clear()  # partition 0's, resumed outright as current
    here = w.pipeline.keys.decides_scope_here
    assert here(0) and not here(1)  # stage 2 in place only on a current scope partition

    # fetched before the pause took hold: partition 1's record is not decided but read again later
    done = w.process([request_on(0, COMMITTED), request_on(1, COMMITTED)])  # type: ignore[list-item]
    assert done.committed == 1 and consumer.seeks == [(topics.REQUESTED, 1, COMMITTED)]
    # after the batch, a slice of the restore: the whole changelog here, so partition 1 resumes
    assert consumer.resumed == {(t, 1) for t in INPUTS} and not consumer.paused and not w.restoring
    assert len(list(w.keys.parts[1].scan(None, 100))) == 30 and here(1)
    assert w.loop.health.ready().ok


def test_a_partition_taken_while_paused_comes_back_resumed_once_current(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # librdkafka keeps a partition's pause through a revocation (as this fake consumer does)
    monkeypatch.setattr(worker_module, "RESTORE_AT_ONCE_S", 0.0)
    w, consumer, reader = worker(tmp_path, GroupProtocol.CLASSIC)
    reader.logs[(topics.CHANGELOG_KEYS, 1)] = [(f"claim-{i}".encode(), b"{}") for i in range(30)]
    w.on_assign(consumer, given(0, 1))
    assert consumer.paused == {(t, 1) for t in INPUTS}
    w.on_revoke(consumer, given(0, 1))  # taken before its restore was done
    monkeypatch.setattr(worker_module, "RESTORE_AT_ONCE_S", 0.2)
    w.on_assign(consumer, given(1))  # given back: the assignment catches it up at once
    assert not w.restoring and not consumer.paused
