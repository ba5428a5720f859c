"""What an executor does when a poll brings nothing: notice a consumer that stopped fetching,
and drop what is older than the key window (results index entries, a connector's markers).

Pruning waits for the executor to be caught up: an approved record still unread may be older
than the window (its executor was down for days), and its intent must still be found."""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping

from confluent_kafka import TopicPartition

from runonce.connectors.executor.results import Results
from runonce.connectors.toolkit.base import Connector, Pruner
from runonce.connectors.toolkit.errors import ConnectorError
from runonce.errors import ConsumerStuck
from runonce.kafka.fetch_stall import FetchStall, leader_ends
from runonce.kafka.loop import GroupConsumer

log = logging.getLogger("runonce.executor")

#: how often an idle executor prunes: the index, and the markers of a connector that keeps them
PRUNE_EVERY_S = 600.0
#: index entries one idle turn prunes at most (the rest at the next ones)
INDEX_PRUNE_STEP = 20_000


class Upkeep:
    def __init__(self, who: str, consumer: GroupConsumer, source_topic: str, index: Results, connector: Connector, *,
                 stall: FetchStall | None = None, prune_window_ms: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``stall``: notices a consumer that stopped fetching after a leader moved
        (runonce/kafka/fetch_stall.py), none: not watched. ``prune_window_ms``: a connector
        that keeps markers of its own (a Pruner) drops those older than this."""
        self.who, self.consumer, self.source_topic = who, consumer, source_topic
        self.index, self.connector = index, connector
        self.stall, self.prune_window_ms, self.clock = stall, prune_window_ms, clock
        self._pruned_at: float | None = None

    def idle(self, starts: Mapping[int, int]) -> None:
        """``starts``: where each assigned partition's reading started (its position until a
        record is read)."""
        self._check_stall()
        self._prune(starts)

    def _check_stall(self) -> None:
        """A consumer with records to read that stopped fetching leaves for a restart (the loop
        itself checks for a lost group coordinator)."""
        if self.stall is None:
            return
        stuck = self.stall.check(leader_ends(self.consumer, self.source_topic),
                                 lambda: [tp.partition for tp in self._assigned()])
        if stuck is not None:
            log.critical("%s: consumer stopped fetching: %s; exiting for a restart", self.who, stuck)
            raise ConsumerStuck(f"{self.who}: {stuck}")

    def _assigned(self) -> list[TopicPartition]:
        return [tp for tp in self.consumer.assignment() if tp.topic == self.source_topic]

    def _prune(self, starts: Mapping[int, int]) -> None:
        """Every ``PRUNE_EVERY_S``: results and markers older than the key window go (the stream
        job forgot those keys too). The index goes in bounded steps, one per idle turn until it
        is done. A connector's failure is logged and tried at the next turn."""
        now = self.clock()
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY_S:
            return
        if not self._caught_up(starts):
            return
        if self.index.expire(INDEX_PRUNE_STEP) >= INDEX_PRUNE_STEP:
            return  # more to go: the next idle turn
        self._pruned_at = now
        if not isinstance(self.connector, Pruner) or self.prune_window_ms is None:
            return
        try:
            self.connector.prune(self.prune_window_ms)
        except ConnectorError as exc:
            log.warning("%s: pruning %s's markers: %s", self.who, self.connector.name, exc)

    def _caught_up(self, starts: Mapping[int, int]) -> bool:
        """Every assigned partition read to its end: the last stable offset, as this
        read_committed consumer's ListOffsets answers. Idle alone is not enough: the first
        fetch after an assignment may simply not have arrived yet."""
        assigned = self._assigned()
        if not assigned:
            return False
        end = leader_ends(self.consumer, self.source_topic)
        for tp in self.consumer.position(assigned):
            at = tp.offset if tp.offset >= 0 else starts.get(tp.partition, -1)
            reached = end(tp.partition)
            if reached is None or at < reached:
                return False
        return True
