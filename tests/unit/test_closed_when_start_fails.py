"""A process whose commit path cannot start (a refused TLS handshake, a fenced id) closes the
consumers it made before it says why and exits. Left to the garbage collector, a consumer closes
itself in its deallocator and serves queued callbacks (stats every 5 s, errors) into an
interpreter that is shutting down: an executor once died of SIGSEGV (-11) right after naming a
failed TLS handshake, where the exit code should have been 2.

Catches: ``clients.closed_if_raised`` taken out of ``process.transactional_clients`` (where
both processes make their consumer and commit path) or of the worker's constructor (its
reader), or its ``except`` not closing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from runonce.connectors.executor import executor as executor_module
from runonce.core.policy import PolicyBook
from runonce.errors import HandshakeFailed
from runonce.kafka import clients, process
from runonce.settings import Settings
from runonce.streams.transactional import worker as worker_module
from tests.support.executor_fakes import KeyedVendor

MADE: list[confluent_kafka.Consumer] = []


class RecordedConsumer(confluent_kafka.Consumer):  # type: ignore[misc]
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        MADE.append(self)


def cannot_start(*args: Any, **kwargs: Any) -> Any:
    raise HandshakeFailed("the TLS handshake with the broker failed (planted)")


def is_closed(consumer: confluent_kafka.Consumer) -> bool:
    try:
        consumer.assignment()
    except RuntimeError:  # "Consumer closed"
        return True
    return False


@pytest.fixture(autouse=True)
def recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    MADE.clear()
    monkeypatch.setattr(confluent_kafka, "Consumer", RecordedConsumer)
    monkeypatch.setattr(clients, "Consumer", RecordedConsumer)
    monkeypatch.setattr(process, "Consumer", RecordedConsumer)
    monkeypatch.setattr(process, "transactional_checkpoint", cannot_start)


def test_an_executor_that_cannot_start_its_commit_path_closes_its_consumer(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, bootstrap="127.0.0.1:9")
    with pytest.raises(HandshakeFailed):
        executor_module.create_executor(settings, KeyedVendor())
    assert MADE and all(is_closed(c) for c in MADE)


def test_a_worker_that_cannot_start_its_commit_path_closes_its_consumer_and_its_reader(tmp_path: Path) -> None:
    with pytest.raises(HandshakeFailed):
        worker_module.TransactionalWorker(Settings(home=tmp_path, bootstrap="127.0.0.1:9"), PolicyBook.load())
    assert len(MADE) == 2 and all(is_closed(c) for c in MADE)
