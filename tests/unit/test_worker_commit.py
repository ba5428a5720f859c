"""The stream worker's commit path with fakes (an injected consumer and producer, real
RocksDB tables): a batch's decisions, changelog and offsets go in one transaction, and its
state reaches RocksDB only after the commit; an aborted batch leaves no state, goes back to
the committed offsets, and decides the same way when it comes again."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from runonce.core.policy import PolicyBook
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.kafka.watchdog import Watchdog
from runonce.sdk.submit import build_request
from runonce.settings import Settings
from runonce.streams.transactional.state import NEXT_OFFSET_KEY
from runonce.streams.transactional.worker import TransactionalWorker
from runonce.wire.codec import Codec
from tests.support.kafka_fakes import FakeProducer, Made, Msg

CODEC = Codec()
T0 = 1_800_000_000_000


class Consumer:
    """Hands out ``batches``, one per consume call; everything committed is at offset 0."""

    def __init__(self, batches: list[list[Msg]]) -> None:
        self.batches = batches
        self.seeks: list[tuple[str, int, int]] = []

    def consume(self, num_messages: int, timeout: float) -> list[Msg]:
        return self.batches.pop(0) if self.batches else []

    def consumer_group_metadata(self) -> str:
        return "group-metadata"

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(topics.REQUESTED, p) for p in range(6)]

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 0) for tp in partitions]

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.topic, tp.partition, tp.offset))


def requests(n: int) -> list[Msg]:
    out = []
    for i in range(n):
        key = f"key-{i}"
        record = build_request("update_salesforce_field", {"record_id": f"r{i}", "field": "f", "value": i},
                               agent_id="a", idempotency_key=key)
        out.append(Msg(topics.REQUESTED, partition_for(key.encode(), 6), i, key.encode(),
                       CODEC.encode("ActionRequested", record), T0 + i))
    return out


def worker(tmp_path: Path, batches: list[list[Msg]], *producers: FakeProducer) -> tuple[TransactionalWorker, Made]:
    made = Made(*producers)
    w = TransactionalWorker(Settings(home=tmp_path, bootstrap="127.0.0.1:9"), PolicyBook.load(),
                            consumer=Consumer(batches), reader=object(), new_producer=made,  # type: ignore[arg-type]
                            watchdog=Watchdog("t", 60, start=False))
    for table in w.tables:
        for p in range(6):
            table.open(p)
    return w, made


def claims(w: TransactionalWorker) -> int:
    """Claims in the keys table's RocksDB (its changelog checkpoint aside)."""
    return sum(1 for p in range(6) for key in w.keys.parts[p].db.keys() if key != NEXT_OFFSET_KEY)


def test_a_batch_commits_decisions_changelog_and_offsets_together_and_then_its_state(tmp_path: Path) -> None:
    batch = requests(4)
    producer = FakeProducer()
    w, _ = worker(tmp_path, [batch], producer)
    assert w.step() == 4
    assert producer.calls[0] == "begin" and producer.calls[-3:] == ["flush", "offsets", "commit"]
    assert producer.calls.count("produce") == 8  # 4 decisions, 4 claims on the keys changelog
    assert claims(w) == 4  # written to RocksDB once the transaction committed


def test_an_aborted_batch_leaves_no_state_goes_back_and_decides_the_same_way_again(tmp_path: Path) -> None:
    batch = requests(4)
    rebalancing = KafkaException(KafkaError(KafkaError.REBALANCE_IN_PROGRESS, "planted", txn_requires_abort=True))
    producer = FakeProducer(fail={"offsets": [rebalancing]})
    w, _ = worker(tmp_path, [batch, batch], producer)
    assert w.step() == 0 and producer.calls[-1] == "abort"
    assert claims(w) == 0  # nothing of the aborted transaction reached RocksDB ...
    assert not any(part.pending for table in w.tables for part in table.parts.values())  # ... or stays pending
    assert sorted(w.consumer.seeks) == [(topics.REQUESTED, p, 0) for p in range(6)]  # back to the committed offsets
    assert w.step() == 4 and claims(w) == 4  # redelivered: decided as the first time, now committed
    produced = producer.calls[producer.calls.index("abort") + 1:]
    assert produced.count("produce") == 8 and produced[-1] == "commit"  # approvals again, not repeats


def test_a_batch_the_broker_did_not_take_in_time_makes_the_next_transactions_smaller(tmp_path: Path) -> None:
    w, _ = worker(tmp_path, [requests(4)], FakeProducer(undelivered=2))
    before = w.cap.records
    assert w.step() == 0 and w.cap.records < before and claims(w) == 0


def test_a_dead_producer_is_replaced_and_the_batch_comes_again(tmp_path: Path) -> None:
    batch = requests(2)
    dead = FakeProducer(fail={"commit": [KafkaException(KafkaError(KafkaError._STATE, "planted", fatal=True))]})
    w, made = worker(tmp_path, [batch, batch], dead)
    assert w.step() == 0 and claims(w) == 0 and len(made.made) == 2
    assert w.step() == 2 and claims(w) == 2 and made.made[1].calls[-1] == "commit"


def step_counts(w: TransactionalWorker) -> dict[str, float]:
    """runonce_transaction_step_seconds' count per step, from the worker's registry."""
    return {s.labels["step"]: s.value for metric in w.metrics.registry.collect()
            if metric.name == "runonce_transaction_step_seconds" for s in metric.samples
            if s.name.endswith("_count")}


def test_each_step_of_a_committed_batch_is_timed_and_an_aborted_batch_is_not(tmp_path: Path) -> None:
    batch = requests(3)
    rebalancing = KafkaException(KafkaError(KafkaError.REBALANCE_IN_PROGRESS, "planted", txn_requires_abort=True))
    w, _ = worker(tmp_path, [batch, batch], FakeProducer(fail={"offsets": [rebalancing]}))
    assert w.step() == 0 and step_counts(w) == {}  # aborted: no step observed
    assert w.step() == 3
    assert step_counts(w) == {"decide": 1.0, "produce": 1.0, "flush": 1.0, "offsets": 1.0, "commit": 1.0}


def test_the_workers_batches_are_lz4_unless_the_deployment_says_otherwise(tmp_path: Path) -> None:
    from runonce.streams.transactional.worker import worker_producer_config

    home = {"RUNONCE_HOME": str(tmp_path)}
    assert worker_producer_config(Settings.from_env(home))["compression.type"] == "lz4"
    chosen = Settings.from_env({**home, "RUNONCE_KAFKA_CONFIG_COMPRESSION_TYPE": "zstd"})
    assert worker_producer_config(chosen)["compression.type"] == "zstd"
