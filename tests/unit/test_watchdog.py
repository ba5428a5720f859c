"""The watchdog leaves when a guarded Kafka call outlives its limit (librdkafka#5456), at the
call's own limit when it has one; a call that returned in time is forgotten."""

from __future__ import annotations

import pytest

from runonce.kafka import watchdog
from runonce.kafka.watchdog import Watchdog


def test_a_call_is_left_at_its_own_limit_and_a_returned_one_never(monkeypatch: pytest.MonkeyPatch) -> None:
    now, left = [0.0], []
    monkeypatch.setattr(watchdog, "leave_for_restart", left.append)
    dog = Watchdog("w", 45.0, clock=lambda: now[0], start=False)
    with dog.guard("commit_transaction"):
        now[0] = 44.0
        dog.check()
    now[0] = 100.0
    dog.check()  # returned in time: nothing to leave for
    assert left == []
    with dog.guard("send_offsets_to_transaction", 15.0):
        now[0] = 114.0
        dog.check()
        assert left == []
        now[0] = 116.0
        dog.check()
    assert left == ["w: send_offsets_to_transaction still blocked after 15 s"]
