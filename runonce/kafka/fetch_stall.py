"""Notice a consumer that has stopped fetching: records it could read, and a fetch position
that does not move.

After a partition's leader moves, librdkafka can leave that partition's fetcher idle for good
(confluentinc/librdkafka#5153, #2625: restarting the consumer clears it). An executor stuck so
holds its partitions, performs nothing, and nothing says so. The client's own statistics
(``statistics.interval.ms``) tell where each partition's fetcher is (``next_offset``,
``fetch_state``, ``fetchq_cnt``); the partition's end, asked of its leader, tells what there
is to read. A partition with records beyond its fetch position, nothing queued locally, and a
position that has not moved for ``limit_s`` is stuck.

An open transaction is no false alarm: a read_committed fetch stops at the last stable
offset only while the transaction is open (seconds; the workers' time out after 10 s), and
an aborted tail is fetched through like any other records."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from runonce.kafka.stats import Stats

log = logging.getLogger("runonce.kafka")

#: how long a partition may have unread records and an unmoved fetch position
STALL_LIMIT_S = 60.0
#: the client's statistics interval: often enough to see a position move, cheap to parse
STATS_INTERVAL_MS = 5000


@dataclass(frozen=True, slots=True)
class Fetcher:
    next_offset: int
    state: str
    queued: int


class FetchStall:
    """Fed the client's statistics (``on_stats``, the ``stats_cb``); ``check`` names a stuck
    partition of ``topic``, asking the leaders for their ends at most every ``check_every_s``."""

    def __init__(self, topic: str, limit_s: float = STALL_LIMIT_S, check_every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.topic = topic
        self.limit_s = limit_s
        self.check_every_s = check_every_s
        self.clock = clock
        self.fetchers: dict[int, Fetcher] = {}
        #: partition -> (fetch position, since when it has been there with records beyond it)
        self._waiting: dict[int, tuple[int, float]] = {}
        self._checked = clock()

    def on_stats(self, stats: Stats) -> None:
        try:
            parts = stats["topics"][self.topic]["partitions"]
        except (KeyError, TypeError):
            return  # no fetch of this topic yet
        for p, d in parts.items():
            if int(p) >= 0 and "next_offset" in d:
                self.fetchers[int(p)] = Fetcher(int(d["next_offset"]), str(d.get("fetch_state", "?")),
                                                int(d.get("fetchq_cnt", 0)))

    def check(self, ends: Callable[[int], int | None], assigned: Callable[[], Iterable[int]]) -> str | None:
        """What is stuck, or None. ``ends(p)`` is partition p's end as its leader says (None when
        the leader cannot be asked: a broker away is a failover in progress, not our stall);
        ``assigned()`` the partitions of ``topic`` the consumer owns. Neither is asked between checks."""
        now = self.clock()
        if now - self._checked < self.check_every_s:
            return None
        self._checked = now
        for p in assigned():
            f = self.fetchers.get(p)
            end = ends(p) if f is not None else None
            if f is None or end is None or f.next_offset < 0 or f.queued > 0 or end <= f.next_offset:
                self._waiting.pop(p, None)
                continue
            at, since = self._waiting.get(p, (f.next_offset, now))
            if at != f.next_offset:
                at, since = f.next_offset, now
            self._waiting[p] = (at, since)
            if now - since >= self.limit_s:
                return (f"{self.topic}[{p}]: records up to offset {end}, but the fetch position has stayed at "
                        f"{f.next_offset} for {now - since:.0f} s (fetch_state {f.state})")
        return None


def leader_ends(consumer: Any, topic: str, timeout_s: float = 5.0) -> Callable[[int], int | None]:
    """``ends`` for ``FetchStall.check``: each partition's end, asked of its leader."""
    from confluent_kafka import KafkaException, TopicPartition

    def end(partition: int) -> int | None:
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s,
                                                      cached=False)[1])
        except KafkaException as exc:
            log.info("%s[%d]: cannot ask for the end (%s)", topic, partition, exc)
            return None

    return end
