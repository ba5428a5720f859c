"""The lost-coordinator check reads librdkafka's own statistics the way the client writes them:
a real consumer that can reach no coordinator (its bootstrap address accepts connections and
never answers, like the paused broker of the fault test) is named once past the limit, while a
real consumer of the same group name on the session's broker, up the whole time, never is."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer

from runonce.kafka import clients, topics
from runonce.kafka.group_stall import GroupStall
from runonce.kafka.stats import stats_callback
from runonce.settings import Settings

pytestmark = [pytest.mark.broker]

LIMIT_S = 3.0


def _black_hole() -> tuple[socket.socket, list[socket.socket]]:
    """A listener that accepts every connection and never answers on any."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return
    threading.Thread(target=accept, daemon=True).start()
    return listener, held


def _consumer(bootstrap: str, group: str, stall: GroupStall) -> Consumer:
    return Consumer({**clients.transactional_consumer_config(bootstrap, group, session_timeout_ms=10_000),
                     "statistics.interval.ms": 500, "stats_cb": stats_callback(stall)})


def test_a_consumer_that_reaches_no_coordinator_is_named_and_one_that_does_is_not(broker: Settings) -> None:
    listener, held = _black_hole()
    group = f"group-stall-{uuid.uuid4().hex[:6]}"
    away, up = GroupStall(limit_s=LIMIT_S), GroupStall(limit_s=LIMIT_S)
    stuck = _consumer(f"127.0.0.1:{listener.getsockname()[1]}", group, away)
    healthy = _consumer(broker.bootstrap_servers(), group + "-up", up)
    try:
        stuck.subscribe([topics.APPROVED])
        healthy.subscribe([topics.APPROVED])
        lost = None
        deadline = time.monotonic() + 30
        # until the stuck one is named and the healthy one has been up past the limit too
        while (lost is None or up.last is None or up.last.age_s < 2 * LIMIT_S) and time.monotonic() < deadline:
            stuck.consume(10, 0.1)
            healthy.consume(10, 0.1)
            assert up.check() is None, f"a consumer with its coordinator was named: {up.last}"
            lost = lost or away.check()
        assert lost is not None, f"a consumer that reached no coordinator for 30 s was never named: {away.last}"
        assert away.last is not None and away.last.state != "up"
        assert up.last is not None and up.last.state == "up" and up.last.age_s >= 2 * LIMIT_S, up.last
        assert held, "the consumer never connected to the black hole: the fault did not apply"
    finally:
        healthy.close()
        listener.close()
        for s in held:
            s.close()
        stuck.close()
