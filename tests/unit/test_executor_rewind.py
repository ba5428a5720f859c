"""After an aborted transaction the executor goes back to the committed offsets, and never
guesses one: an unknown position re-read actions.approved from offset 0 and performed actions
approved before the executor's group began."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from runonce.connectors.executor import Executor
from runonce.errors import FatalError


class FakeConsumer:
    def __init__(self, committed: list[Any]) -> None:
        self._committed = committed
        self.seeks: list[tuple[int, int]] = []

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition) for tp in self._committed]

    def committed(self, partitions: Any, timeout: float) -> list[Any]:
        return self._committed

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.partition, tp.offset))


def _executor(consumer: FakeConsumer) -> Executor:
    executor = Executor.__new__(Executor)  # no broker: only the rewind logic is under test
    executor.consumer = consumer  # type: ignore[assignment]
    executor.pending = {("actions.approved", 0): 9}
    executor.transactional_id = "runonce-exec-test-0"
    return executor


def test_rewind_seeks_to_the_committed_offsets() -> None:
    consumer = FakeConsumer([TopicPartition("actions.approved", 0, 120), TopicPartition("actions.approved", 1, 7)])
    executor = _executor(consumer)
    executor._rewind()
    assert consumer.seeks == [(0, 120), (1, 7)] and executor.pending == {}


@pytest.mark.parametrize("bad", [
    TopicPartition("actions.approved", 1, -1001),  # no committed offset known
    # what committed() returns for a partition it could not look up
    SimpleNamespace(topic="actions.approved", partition=1, offset=5,
                    error=KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE)),
])
def test_rewind_never_guesses_a_position(bad: Any) -> None:
    consumer = FakeConsumer([TopicPartition("actions.approved", 0, 120), bad])
    with pytest.raises(FatalError, match="cannot rewind"):
        _executor(consumer)._rewind()
    assert consumer.seeks == []  # no partition moved, least of all to offset 0
