"""The transactional runtime's state on real RocksDB (rocksdict): a transaction's changes are
invisible to the database until it commits, land with their changelog checkpoint in one write
batch, and vanish on abort; a restart reads only the changelog's tail, and a database the
changelog cannot have produced is rebuilt. The changelog here is a list (no Kafka)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from runonce.streams.transactional.restore import RestoreJob, RestoreStuck, restore
from runonce.streams.transactional.state import NEXT_OFFSET_KEY, TableState
from tests.support.kafka_fakes import Msg

LOG = "runonce-keys-changelog"


class Changelog:
    """A changelog partition as a read_committed reader sees it: records at their offsets; the
    offsets in between (commit markers, aborted records) are skipped, and the high watermark
    may sit past the last record."""

    def __init__(self, records: dict[int, tuple[bytes, bytes | None]], high: int, low: int = 0) -> None:
        self.records, self.high, self.low = records, high, low
        self._at = -1
        self.read_from: list[int] = []

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        return self.low, self.high

    def assign(self, tps: list[TopicPartition]) -> None:
        self._at = tps[0].offset
        self.read_from.append(self._at)

    def consume(self, n: int, timeout: float) -> list[Msg]:
        out = []
        while self._at < self.high and len(out) < n:
            if self._at in self.records:
                out.append(Msg(LOG, 0, self._at, *self.records[self._at]))
            self._at += 1
        return out

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(LOG, 0, self._at)]

    def unassign(self) -> None:
        pass


def test_a_transaction_is_invisible_to_rocksdb_until_it_commits(tmp_path: Path) -> None:
    table = TableState("keys", LOG, tmp_path)
    part = table.open(0)
    table.put(0, b"k1", b"v1")
    assert table.get(0, b"k1") == b"v1"  # the open transaction reads its own writes
    assert part.db.get(b"k1") is None and part.next_offset is None
    table.commit({0: 17})
    assert part.db.get(b"k1") == b"v1" and part.next_offset == 17 and part.pending == {}
    table.delete(0, b"k1")
    table.put(0, b"k2", b"v2")
    table.abort()
    assert table.get(0, b"k1") == b"v1" and table.get(0, b"k2") is None and part.next_offset == 17
    assert list(table.changes()) == []


def test_a_scan_sees_what_get_sees_the_open_transaction_included(tmp_path: Path) -> None:
    # The holds sweep scans for due holds: one put earlier in the same transaction must be found.
    table = TableState("holds", LOG, tmp_path)
    table.open(0)
    for key in (b"a", b"c", b"e"):
        table.put(0, key, b"old")
    table.commit({0: 3})
    table.put(0, b"b", b"new")     # a key only the transaction has
    table.delete(0, b"c")          # a key the transaction deleted
    table.put(0, b"e", b"changed")
    table.put(0, b"z", b"late")    # beyond a full page's last committed key: the next page's
    assert list(table.scan(0, None, 10)) == [(b"a", b"old"), (b"b", b"new"), (b"e", b"changed"), (b"z", b"late")]
    assert list(table.scan(0, b"b", 10)) == [(b"e", b"changed"), (b"z", b"late")]
    assert list(table.scan(0, None, 2)) == [(b"a", b"old"), (b"b", b"new")]


def test_state_and_checkpoint_survive_a_reopen(tmp_path: Path) -> None:
    table = TableState("keys", LOG, tmp_path)
    table.open(3)
    table.put(3, b"a", b"1")
    table.put(3, b"b", b"2")
    table.commit({3: 5})
    table.close_all()
    again = TableState("keys", LOG, tmp_path).open(3)
    assert (again.get(b"a"), again.get(b"b"), again.next_offset) == (b"1", b"2", 5)
    assert [k for k, _ in again.scan(None, 10)] == [b"a", b"b"]  # the checkpoint is no state entry
    assert again.db.get(NEXT_OFFSET_KEY) == b"5"


def test_a_missing_database_is_rebuilt_from_the_changelog_and_tombstones_delete(tmp_path: Path) -> None:
    log = Changelog({0: (b"a", b"1"), 1: (b"b", b"2"), 3: (b"a", None)}, high=5)  # 2, 4: markers
    table = TableState("keys", LOG, tmp_path)
    done = restore(log, table, 0)
    part = table.parts[0]
    assert (done.records, done.rebuilt, log.read_from) == (3, True, [0])
    assert part.get(b"a") is None and part.get(b"b") == b"2" and part.next_offset == 5


def test_a_restart_reads_only_the_tail(tmp_path: Path) -> None:
    table = TableState("keys", LOG, tmp_path)
    table.open(0)
    table.put(0, b"a", b"1")
    table.commit({0: 2})
    log = Changelog({0: (b"a", b"1"), 2: (b"c", b"3")}, high=4)  # another owner wrote offset 2 meanwhile
    done = restore(log, table, 0)
    assert (done.records, done.rebuilt, log.read_from) == (1, False, [2])
    assert table.get(0, b"c") == b"3" and table.parts[0].next_offset == 4


def test_a_restore_read_a_slice_at_a_time_ends_where_a_whole_one_does(tmp_path: Path) -> None:
    records = {i: (f"k{i % 7}".encode(), None if i % 5 == 4 else f"v{i}".encode()) for i in range(25)}
    sliced, whole = TableState("keys", LOG, tmp_path / "sliced"), TableState("keys", LOG, tmp_path / "whole")
    job = RestoreJob(Changelog(records, high=27), sliced, 0)
    steps = 0
    while not job.step(0.0, batch=10):  # no time to spare: one fetch a slice
        steps += 1
        assert job.position == 10 * steps and sliced.parts[0].next_offset == job.position
    restore(Changelog(records, high=27), whole, 0)
    assert steps == 2 and job.result().records == 25 and sliced.parts[0].next_offset == 27
    assert list(sliced.scan(0, None, 100)) == list(whole.scan(0, None, 100))


def test_a_database_ahead_of_its_changelog_is_not_trusted(tmp_path: Path) -> None:
    table = TableState("keys", LOG, tmp_path)
    table.open(0)
    table.put(0, b"stale", b"x")
    table.commit({0: 50})  # e.g. the topics were recreated
    log = Changelog({0: (b"a", b"1")}, high=2)
    done = restore(log, table, 0)
    assert done.rebuilt and table.get(0, b"stale") is None and table.get(0, b"a") == b"1"


def test_nothing_to_read_is_cheap(tmp_path: Path) -> None:
    table = TableState("keys", LOG, tmp_path)
    table.open(0)
    table.put(0, b"a", b"1")
    table.commit({0: 2})
    log = Changelog({0: (b"a", b"1")}, high=2)
    done = restore(log, table, 0)
    assert (done.records, log.read_from) == (0, [])



class LeaderLost(Changelog):
    """A changelog whose partition has no leader for the first ``lost`` lookups (a broker failover)."""

    def __init__(self, lost: int, code: int = KafkaError._UNKNOWN_PARTITION, fatal: bool = False) -> None:
        super().__init__({0: (b"a", b"1")}, high=1)
        self.lost, self.code, self.fatal, self.asked = lost, code, fatal, 0

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        self.asked += 1
        if self.asked <= self.lost:
            raise KafkaException(KafkaError(self.code, "Failed to get watermark offsets", fatal=self.fatal))
        return super().get_watermark_offsets(tp, timeout, cached)


def test_a_changelog_without_a_leader_is_asked_again_until_one_is_elected(tmp_path: Path) -> None:
    log = LeaderLost(lost=3)
    done = restore(log, TableState("keys", LOG, tmp_path), 0, backoff_s=0.01)
    assert (log.asked, done.records, done.to_offset) == (4, 1, 1)


def test_a_changelog_without_a_leader_for_too_long_stops_the_restore(tmp_path: Path) -> None:
    log = LeaderLost(lost=10**6, code=KafkaError._TIMED_OUT)
    with pytest.raises(RestoreStuck, match="within 0 s"):
        restore(log, TableState("keys", LOG, tmp_path), 0, bounds_timeout_s=0.2, backoff_s=0.05)
    assert log.asked > 1


def test_a_fatal_client_error_is_not_asked_again(tmp_path: Path) -> None:
    log = LeaderLost(lost=1, code=KafkaError._FENCED, fatal=True)
    with pytest.raises(RestoreStuck):
        restore(log, TableState("keys", LOG, tmp_path), 0, backoff_s=0.01)
    assert log.asked == 1
