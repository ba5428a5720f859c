"""What an executor knows about past attempts: the latest result per action id (and which
action first used each vendor key), restored from ``actions.results`` for the partitions it
owns. Results are written to the same partition number as the approved record, so the
owner of approved partition p is the only writer of results partition p.

Bounded by what can still matter, never the topic's whole history (``restore``):

- the first line of defence (an action's own intent or result, by action id) matters only for
  approved records that can still be delivered: those at or after the group's committed
  offset. Each was written to ``actions.approved`` before any result of it, so results from
  the time the first of them was written on are enough;
- the second line (a vendor key's first user) matters within the longest key TTL of the
  policies: the stream job approves a key again only after its TTL, as a new action on purpose.

Reading starts at the earlier of the two times, less a margin for clocks (results carry their
executor's clock, approved records their worker's), found through the broker's time index:
a restart reads the last day's results, not a month's.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping

from confluent_kafka import KafkaError, TopicPartition

from runonce.errors import InvalidInput
from runonce.kafka import clients, topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_messages
from runonce.wire.codec import Codec
from runonce.wire.results import Result, result_of

log = logging.getLogger("runonce.executor")

#: how far two processes' clocks may disagree (results and approved records carry theirs)
CLOCK_MARGIN_MS = 5 * 60 * 1000
#: the key window when no policy says otherwise
DEFAULT_WINDOW_MS = 24 * 3600 * 1000


class ResultIndex:
    def __init__(self, bootstrap: KafkaTarget, tools: frozenset[str], codec: Codec | None = None,
                 timeout_s: float = 60.0, *, window_ms: int = DEFAULT_WINDOW_MS, source_topic: str = topics.APPROVED,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.bootstrap = bootstrap
        self.tools = tools
        self.codec = codec or Codec()
        self.timeout_s = timeout_s
        #: the longest key TTL of the policies: how long a vendor key's first user matters
        self.window_ms = window_ms
        self.source_topic = source_topic
        self.clock_ms = clock_ms
        self.by_action: dict[str, Result] = {}
        #: vendor key -> the action id that first used it (second line of defense)
        self.by_key: dict[str, str] = {}
        #: records on actions.results that are no ActionResult (a foreign writer's), counted and logged
        self.unreadable = 0

    def put(self, action_id: str, vendor_key: str, result: Result) -> None:
        self.by_action[action_id] = result
        self.by_key.setdefault(vendor_key, action_id)

    def restore(self, starts: Mapping[int, int]) -> int:
        """Read the results that can still matter for these approved partitions (partition ->
        the offset reading starts at) to their end, read_committed; returns records applied."""
        if not starts:
            return 0
        since_ms = min(self.clock_ms() - self.window_ms, self._first_unread_ms(starts)) - CLOCK_MARGIN_MS
        applied = 0
        for msg in read_messages(self.bootstrap, topics.RESULTS, self.timeout_s, partitions=list(starts),
                                 since_ms=since_ms if since_ms > 0 else None):
            value = msg.value()
            if value is None:
                continue
            try:
                _, r = self.codec.decode(value, expect="ActionResult")
            except InvalidInput as exc:  # not an executor's: it tells nothing about any action
                self.unreadable += 1
                log.warning("results: skipped an unreadable record at %s[%d]@%d: %s",
                            msg.topic(), msg.partition(), msg.offset(), exc)
                continue
            if r["tool"] in self.tools:
                # the vendor key the executor wrote (a tenant's own), else the action id
                self.put(r["action_id"], r["idempotency_key"] or r["action_id"], result_of(r))
                applied += 1
        return applied

    def _first_unread_ms(self, starts: Mapping[int, int]) -> int:
        """When the earliest approved record still to be read was written (now, if none is)."""
        earliest = self.clock_ms()
        reader = clients.reader(self.bootstrap, group="runonce-reader-results-window", to_end=True)
        try:
            reader.assign([TopicPartition(self.source_topic, p, offset) for p, offset in starts.items()])
            pending = set(starts)
            deadline = time.monotonic() + self.timeout_s
            while pending and time.monotonic() < deadline:
                msg = reader.poll(0.5)
                if msg is None or msg.partition() not in pending:
                    continue
                err = msg.error()
                if err is None:
                    earliest = min(earliest, msg.timestamp()[1])
                elif err.code() != KafkaError._PARTITION_EOF:  # not known yet: keep asking
                    log.warning("results window: %s[%d]: %s", self.source_topic, msg.partition(), err)
                    continue
                pending.discard(msg.partition())
            if pending:  # unknown: read from the beginning (time 0) rather than miss a result
                log.warning("results window: no answer for %s %s; restoring their whole history",
                            self.source_topic, sorted(pending))
                return 0
            return earliest
        finally:
            reader.close()
