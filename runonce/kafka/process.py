"""A transactional process's Kafka clients, assembled in one place for the stream worker and
every executor: its consumer (read_committed, explicit positions, a static member of its
group when asked), the consumer's statistics parsed once for each reader and for the group
stall watch, and its commit path. A consumer made here is closed if the commit path cannot
start (clients.closed_if_raised)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from confluent_kafka import Consumer, Producer

from runonce.kafka import clients
from runonce.kafka.access import KafkaTarget
from runonce.kafka.checkpoint import Checkpoint, Step
from runonce.kafka.fetch_stall import STATS_INTERVAL_MS
from runonce.kafka.group_stall import GroupStall
from runonce.kafka.loop import GroupConsumer, transactional_checkpoint
from runonce.kafka.stats import StatsReader, stats_callback
from runonce.kafka.watchdog import Watchdog


@dataclass(frozen=True, slots=True)
class TransactionalClients:
    consumer: GroupConsumer
    checkpoint: Checkpoint
    #: notices a consumer that lost its group coordinator for good (group_stall.py)
    group_stall: GroupStall


class GroupProtocol(enum.StrEnum):
    """A consumer group's rebalance protocol (librdkafka's ``group.protocol``); the first is the default."""

    #: the client-side protocol: a rebalance revokes every partition of every member, then assigns
    CLASSIC = "classic"
    #: KIP-848 (Kafka 4.0+): the broker assigns, and moves only the partitions that change owner;
    #: a member's session timeout and heartbeat are the broker's (``group.consumer.*``)
    CONSUMER = "consumer"


@dataclass(frozen=True, slots=True)
class Membership:
    """How the process joins its group: ``group``, its session timeout, whether it is a static
    member (KIP-345, ``group.instance.id`` = its transactional id: restarted under the same id,
    it takes its partitions back at once instead of after the session timeout of the instance
    it replaces), and its group protocol. Under the classic protocol two live processes of one
    id fence each other in the group as in their transactions; under KIP-848 the one joining
    second is refused (a fatal error) until the first has left or its session expired."""

    group: str
    session_timeout_ms: int
    static: bool
    protocol: GroupProtocol = GroupProtocol.CLASSIC

    @property
    def incremental(self) -> bool:
        """Assignments change partition by partition (KIP-848), not all at once."""
        return self.protocol is GroupProtocol.CONSUMER


def consumer_settings(access: KafkaTarget, transactional_id: str, membership: Membership,
                      extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The consumer's configuration, but for its statistics: a transactional consumer's
    (clients.py), the process's ``extra``, and its membership."""
    static = {"group.instance.id": transactional_id} if membership.static else {}
    # under KIP-848 the broker keeps the session and the heartbeat, and librdkafka refuses the keys
    protocol = {"group.protocol": "consumer"} if membership.incremental else {}
    return clients.transactional_consumer_config(
        access, membership.group, session_timeout_ms=None if membership.incremental else membership.session_timeout_ms,
        **{**(extra or {}), **static, **protocol})


def transactional_clients(access: KafkaTarget, transactional_id: str, membership: Membership, *,
                          transaction_timeout_ms: int, consumer_config: Mapping[str, Any] | None = None,
                          producer_config: Mapping[str, Any] | None = None,
                          stats_readers: Sequence[StatsReader] = (), consumer: GroupConsumer | None = None,
                          new_producer: Callable[[], Producer] | None = None, watchdog: Watchdog | None = None,
                          on_step: Callable[[Step, float], None] | None = None) -> TransactionalClients:
    """``consumer_config``/``producer_config``: what this process adds to every transactional
    client's; ``stats_readers``: what reads the consumer's statistics beside the group stall
    watch. ``consumer``, ``new_producer``, ``watchdog``: tests' fakes."""
    group_stall = GroupStall()
    if consumer is None:
        consumer = Consumer({**consumer_settings(access, transactional_id, membership, consumer_config),
                             "statistics.interval.ms": STATS_INTERVAL_MS,
                             "stats_cb": stats_callback(group_stall, *stats_readers)})
    with clients.closed_if_raised(consumer):
        checkpoint = transactional_checkpoint(access, transactional_id, consumer,
                                              transaction_timeout_ms=transaction_timeout_ms,
                                              producer_config=producer_config, new_producer=new_producer,
                                              watchdog=watchdog, on_step=on_step)
    return TransactionalClients(consumer, checkpoint, group_stall)
