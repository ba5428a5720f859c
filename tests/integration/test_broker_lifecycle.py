"""The local broker's lifecycle, on a broker of its own (not the session's)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from runonce.devbroker.broker import Broker, BrokerState, pid_alive
from runonce.settings import Settings

pytestmark = pytest.mark.broker


def test_start_twice_stop_status_and_crash(base_settings: Settings, tmp_path) -> None:
    settings = base_settings.with_(home=tmp_path / "lifecycle", broker_heap_mb=256)
    broker = Broker(settings)
    assert broker.status().state is BrokerState.STOPPED
    try:
        first = broker.start()
        assert first.state is BrokerState.RUNNING and first.bootstrap
        assert settings.bootstrap_file.read_text().strip() == first.bootstrap  # where clients find it
        again = broker.start()
        assert again.pid == first.pid  # starting twice does not start a second broker
        assert broker.status().state is BrokerState.RUNNING

        stopped = broker.stop()
        assert stopped.state is BrokerState.STOPPED and not pid_alive(first.pid)

        restarted = broker.start()
        assert restarted.bootstrap == first.bootstrap  # same ports when free: clients keep their address
        os.kill(restarted.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(restarted.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        crashed = broker.status()
        assert crashed.state is BrokerState.CRASHED  # told apart from a clean stop
        assert "crashed" in crashed.describe() and "broker.log" in crashed.describe()

        # Started again after the crash, the dead broker is fenced before the new one registers:
        # else the new one would wait out the dead one's session, leading every partition by its
        # stale registration, and the fence would strand transaction markers (broker.py).
        log_from = broker.log_file.stat().st_size
        assert broker.start().state is BrokerState.RUNNING
        log = broker.log_file.read_text(errors="replace")[log_from:]
        fenced = log.find("Fencing broker 1 at epoch")
        registered = log.find("Registering a new incarnation of broker 1")
        assert 0 <= fenced < registered, log[-3000:]
        assert "DUPLICATE_BROKER_REGISTRATION" not in log
    finally:
        final = broker.stop()
    assert final.state is BrokerState.STOPPED


def test_topics_create_brings_an_existing_topic_to_its_configs(broker: Settings) -> None:
    """A home made by an older runonce keeps its topics; `topics create` updates their configs."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    from runonce.kafka import topics

    admin = topics.admin_client(broker.bootstrap_servers())
    old = ConfigResource(ConfigResource.Type.TOPIC, topics.DLQ, incremental_configs=[
        ConfigEntry("max.message.bytes", "1048588", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([old])[old].result()
    resource = ConfigResource(ConfigResource.Type.TOPIC, topics.DLQ)
    deadline = time.monotonic() + 20
    while admin.describe_configs([resource])[resource].result()["max.message.bytes"].value != "1048588":
        assert time.monotonic() < deadline, "the broker never showed the old config"
        time.sleep(0.2)  # a config change reaches the broker's view through the metadata log
    outcome = topics.create_topics(broker.bootstrap_servers(), broker.partitions)
    assert outcome[topics.DLQ] == "updated"
    assert {name for name, what in outcome.items() if what != "exists"} == {topics.DLQ}
    wanted = next(spec for spec in topics.TOPICS if spec.name == topics.DLQ).configs["max.message.bytes"]
    while admin.describe_configs([resource])[resource].result()["max.message.bytes"].value != wanted:
        assert time.monotonic() < deadline + 20, "the update never took effect"
        time.sleep(0.2)
    assert topics.create_topics(broker.bootstrap_servers(), broker.partitions)[topics.DLQ] == "exists"


def test_topics_create_on_one_broker_keeps_one_copy_and_says_so(broker: Settings) -> None:
    """Replication follows the cluster: one broker, one copy, one in sync, and a warning; a
    factor the cluster cannot hold is refused before anything is created."""
    from confluent_kafka.admin import ConfigResource

    from runonce.errors import ConfigError
    from runonce.kafka import topics

    heard: list[str] = []
    outcome = topics.create_topics(broker.bootstrap_servers(), broker.partitions, say=heard.append)
    assert set(outcome.values()) <= {"exists", "updated"}, outcome
    assert len(heard) == 1 and heard[0].startswith("warning: replication factor 1"), heard
    admin = topics.admin_client(broker.bootstrap_servers())
    meta = admin.list_topics(timeout=10).topics
    resources = [ConfigResource(ConfigResource.Type.TOPIC, spec.name) for spec in topics.TOPICS]
    for spec, (resource, fut) in zip(topics.TOPICS, admin.describe_configs(resources).items()):
        assert {len(p.replicas) for p in meta[spec.name].partitions.values()} == {1}, spec.name
        assert fut.result()["min.insync.replicas"].value == "1", spec.name
    with pytest.raises(ConfigError, match="needs at least 3 brokers"):
        topics.create_topics(broker.bootstrap_servers(), broker.partitions, replication_factor=3)
