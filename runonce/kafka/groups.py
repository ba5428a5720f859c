"""Consumer-group offsets set from outside the group."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from runonce.errors import BrokerUnavailable, ConfigError
from runonce.kafka import clients
from runonce.kafka.access import KafkaTarget

#: every executor group and transactional id begins with this (acls.toml grants the prefix)
EXECUTOR_PREFIX = "runonce-exec-"


def start_group_at_end(bootstrap: KafkaTarget, group: str, topic: str, timeout_s: float = 10.0) -> None:
    """Commit the topic's current end offsets for ``group``: it starts with what comes next."""
    c = Consumer({**clients.base_config(bootstrap), "group.id": group, "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=timeout_s).topics[topic].partitions
        deadline = time.monotonic() + timeout_s
        while True:  # a just-created topic answers NOT_LEADER for a moment
            try:
                ends = [TopicPartition(topic, p, c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1])
                        for p in parts]
                break
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise BrokerUnavailable(f"cannot read the end offsets of {topic}: {exc}") from exc
                time.sleep(0.2)
        try:
            c.commit(offsets=ends, asynchronous=False)
        except KafkaException as exc:
            # The broker refuses commits from outside a group that has live members.
            raise ConfigError(f"cannot move group {group} to the end of {topic}: it has active members "
                              f"(start from the end only with a new or idle group): {exc}") from exc
    finally:
        c.close()
