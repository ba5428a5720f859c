"""Where a record goes next: the stream job's routing rules as pure functions (no Kafka
client, no state), named here once and tested as such (tests/unit/test_routing.py).

- Stage 1 decides a key only on the partition that owns it (murmur2 of the key, as Kafka's
  producers place it); a record that arrived elsewhere is re-keyed to its owner first.
- A stage-1 PASS goes to the scoped topic, on the scope's partition; APPROVE and DROP are final.
- Origin headers (where a request first arrived) are trusted only on the re-key topic, which
  only this job writes; on actions.requested they are whatever an agent put there.
- A record that cannot be decided (undecodable, or breaking a rule) is dead-lettered: the
  callers catch ``InvalidInput`` and route it to actions.dlq with its reason."""

from __future__ import annotations

from runonce.core.decision import Outcome
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for

_NEXT_TOPIC = {Outcome.PASS: topics.SCOPED, Outcome.APPROVE: topics.APPROVED, Outcome.DROP: topics.DROPPED}


def owner_partition(key: str, partitions: int) -> int:
    """The partition whose stage 1 (or stage 2, for a scope) decides ``key``."""
    return partition_for(key, partitions)


def needs_rekey(key: str, arrived_on: int, partitions: int) -> bool:
    """A record decided on the wrong partition would race its key's owner: move it first."""
    return owner_partition(key, partitions) != arrived_on


def next_topic(outcome: Outcome) -> str:
    return _NEXT_TOPIC[outcome]


def trusts_origin_headers(topic: str) -> bool:
    return topic == topics.REKEY
