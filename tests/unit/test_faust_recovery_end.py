"""markers.CheckedPositions: faust's recovery may call a changelog partition recovered only when
the broker has no committed record after the last one applied, whatever the consumer's position
says (faust can move the position past records it never delivers)."""

from __future__ import annotations

import asyncio
from typing import NamedTuple, Optional

from runonce.errors import BrokerUnavailable
from runonce.streams.faust_runtime.markers import CheckedPositions


class TP(NamedTuple):
    topic: str
    partition: int


CHANGELOG = TP("runonce-keys-changelog", 3)


class FakeConsumer:
    def __init__(self, position: int) -> None:
        self._position = position
        self.seeks: list[tuple[TP, int]] = []

    async def position(self, tp: TP) -> Optional[int]:
        return self._position

    async def seek(self, tp: TP, offset: int) -> None:
        self.seeks.append((tp, offset))

    def assignment(self) -> set[TP]:
        return {CHANGELOG}


class FakeRecovery:
    def __init__(self, applied: int, last: int) -> None:
        self.active_offsets = {CHANGELOG: applied}
        self.active_highwaters = {CHANGELOG: last}


def _position(consumer: FakeConsumer, applied: int, last: int, first: Optional[int] | Exception) -> Optional[int]:
    asked: list[tuple[str, int, int]] = []

    def first_committed(topic: str, partition: int, offset: int) -> Optional[int]:
        asked.append((topic, partition, offset))
        if isinstance(first, Exception):
            raise first
        return first

    checked = CheckedPositions(consumer, FakeRecovery(applied, last), first_committed)
    found = asyncio.run(checked.position(CHANGELOG))
    assert asked in ([], [(CHANGELOG.topic, CHANGELOG.partition, applied + 1)])
    return found


def test_records_the_consumer_skipped_are_fetched_again_and_recovery_goes_on() -> None:
    # applied up to 5100, the partition's last offset is 5200, the consumer claims 5201,
    # but the broker holds a committed record at 5103: recovery must not end
    consumer = FakeConsumer(position=5201)
    found = _position(consumer, applied=5100, last=5200, first=5103)
    assert found is not None and found < 5200
    assert consumer.seeks == [(CHANGELOG, 5103)]


def test_markers_and_aborted_records_alone_end_recovery() -> None:
    consumer = FakeConsumer(position=5201)
    assert _position(consumer, applied=5100, last=5200, first=None) == 5201
    assert _position(consumer, applied=5100, last=5200, first=5201) == 5201  # written since
    assert consumer.seeks == []


def test_a_broker_that_cannot_tell_keeps_recovery_waiting() -> None:
    consumer = FakeConsumer(position=5201)
    found = _position(consumer, applied=5100, last=5200, first=BrokerUnavailable("no answer"))
    assert found is not None and found < 5200
    assert consumer.seeks == []


def test_a_position_short_of_the_end_needs_no_question() -> None:
    consumer = FakeConsumer(position=4000)
    assert _position(consumer, applied=3999, last=5200, first=AssertionError("asked")) == 4000
    assert CheckedPositions(consumer, FakeRecovery(0, 0), lambda *a: None).assignment() == {CHANGELOG}


def test_a_principal_refused_the_question_stops_the_worker() -> None:
    # faust's recovery swallows exceptions: waiting on an ACL that will not change would leave a
    # worker that decides nothing for ever (seen on the secured broker, GROUP_AUTHORIZATION_FAILED)
    from runonce.errors import AccessDenied

    stopped: list[str] = []

    def refused(topic: str, partition: int, offset: int) -> Optional[int]:
        raise AccessDenied("FindCoordinator: Group authorization failed")

    checked = CheckedPositions(FakeConsumer(position=5201), FakeRecovery(5100, 5200), refused, on_fatal=stopped.append)
    try:
        asyncio.run(checked.position(CHANGELOG))
    except AccessDenied:
        pass
    assert stopped and "runonce-keys-changelog[3]" in stopped[0]
