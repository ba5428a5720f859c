"""What /healthz and /readyz answer (runonce/kafka/health.py), as the one consumer loop tells
it, served beside /metrics on one port (runonce/ops/observe/serve.py).

Each test names the break it catches: ready before the restore ends; ready with no transactional
producer yet; still ready after SIGTERM; live while the loop is stuck; dead while a long restore
runs (the kubelet would kill a worker restoring 10 M keys); a probe server that answers 200
whatever the verdict."""

from __future__ import annotations

import os
import signal
from typing import Any

from confluent_kafka import TopicPartition
from prometheus_client import CollectorRegistry, Counter

from runonce.kafka.health import Health
from runonce.kafka.loop import ConsumerLoop
from runonce.ops.observe.serve import ProbeServer
from tests.support.clock import Clock
from tests.support.executor_fakes import FakeConsumer, Msg
from tests.support.probes import get
from tests.unit.test_loop import Task


def test_live_while_the_loop_turns_and_not_once_it_is_stuck_past_its_bound() -> None:
    """Catches ``live`` ignoring the time since the last turn (a stuck loop kept alive)."""
    clock = Clock(100.0)
    health = Health("w", live_bound_s=60.0, clock=clock)
    clock.now += 59
    assert health.live().ok
    health.turned()
    clock.now += 61
    answer = health.live()
    assert not answer.ok and "has not turned for 61 s" in answer.reason


def test_the_default_bound_kills_a_loop_stuck_past_a_minute() -> None:
    """Catches the default live bound raised (60 s to 6,000 s: a worker stuck for an hour kept
    alive by the kubelet). The bound is written here, not read from LIVE_BOUND_S: a loop turn is
    at most one fetch wait plus one transaction under its watchdog (45 s)."""
    clock = Clock(100.0)
    health = Health("w", clock=clock)
    clock.now += 59
    assert health.live().ok
    clock.now += 2
    answer = health.live()
    assert not answer.ok and "has not turned for 61 s" in answer.reason


def test_a_long_restore_is_live_and_not_ready() -> None:
    """Catches a restore counted as a stuck loop (killed mid-restore, forever) or as ready."""
    clock = Clock(100.0)
    health = Health("w", live_bound_s=60.0, clock=clock)
    health.started()
    health.restoring()
    clock.now += 600
    assert health.live().ok and not health.ready().ok and "restoring" in health.ready().reason


class Recorder(Task):
    """A task that records what the probes say while its partitions are restored."""

    def __init__(self, health: Health) -> None:
        super().__init__(defer=False)
        self.health = health
        self.ready_during_restore: list[bool] = []

    def on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.ready_during_restore.append(self.health.ready().ok)


def test_the_loop_is_ready_only_once_started_and_its_partitions_restored_and_not_after_sigterm() -> None:
    """Catches the loop marking itself ready before the task's on_assign returns (before the
    restore ends), ready before its run (the producer initialises in the task's constructor),
    and still ready after SIGTERM (new traffic, a new assignment sent to a process leaving)."""
    consumer = FakeConsumer([])
    health = Health("w")
    task = Recorder(health)
    loop = ConsumerLoop("w", consumer, task, ["actions.approved"], wait_s=0.0, health=health)
    assert not health.ready().ok and "initialising" in health.ready().reason
    health.started()  # what run() says first; here by hand, to drive the assignment as the client would
    loop._on_assign(consumer, [TopicPartition("actions.approved", 0)])  # noqa: SLF001 (the client's callback)
    assert task.ready_during_restore == [False] and health.ready().ok
    loop._on_revoke(consumer, [TopicPartition("actions.approved", 0)])  # noqa: SLF001
    assert not health.ready().ok
    loop._on_assign(consumer, [])  # noqa: SLF001  (no partition: stands by, ready)
    assert health.ready().ok
    consumer.messages = [Msg(0, 1, b"a")]
    seen: list[bool] = []
    task.on_batch = lambda: (os.kill(os.getpid(), signal.SIGTERM), seen.append(health.ready().ok))
    previous = signal.getsignal(signal.SIGTERM)
    try:
        loop.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [False] and "stopping (SIGTERM)" in health.ready().reason and health.live().ok




def test_one_port_serves_metrics_and_both_probes_with_their_verdicts() -> None:
    """Catches a probe answering 200 whatever the verdict (a pod never restarted, or sent traffic
    while it restores)."""
    registry = CollectorRegistry()
    Counter("runonce_probe_test", "a counter", registry=registry).inc()
    health = Health("executor payments/0")
    server = ProbeServer("127.0.0.1", 0, registry, health)
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert get(f"{base}/readyz") == (503, "executor payments/0: initialising its transactional producer\n")
        health.started()
        health.assigned()
        assert get(f"{base}/readyz") == (200, "executor payments/0: ready\n")
        assert get(f"{base}/healthz")[0] == 200
        status, body = get(f"{base}/metrics")
        assert status == 200 and "runonce_probe_test_total 1.0" in body
        assert get(f"{base}/nothing")[0] == 404
    finally:
        server.close()
