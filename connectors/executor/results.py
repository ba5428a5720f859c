"""What an executor knows about past attempts: the latest result per action id (and which
action first used each vendor key), kept on disk (result_store.py) and brought up to date
from ``actions.results`` for the partitions it owns. Results are written to the same
partition number as the approved record, so the owner of approved partition p is the only
writer of results of its tools to results partition p.

A partition the store knows is read from the offset the store is complete up to: a restart
over an intact folder reads what was written since, not the day. The executor's own commits
reach the store with the end of their transaction on each partition (``learn``), so that
offset follows the executor's work, not only its restores.

A partition the store does not know (an empty folder, a partition new to this executor) is
read from what can still matter, never the topic's whole history:

- the first line of defence (an action's own intent or result, by action id) matters only for
  approved records that can still be delivered: those at or after the group's committed
  offset. Each was written to ``actions.approved`` before any result of it, so results from
  the time the first of them was written on are enough;
- the second line (a vendor key's first user) matters within the longest key TTL of the
  policies: the stream job approves a key again only after its TTL, as a new action on purpose.

Reading starts at the earlier of the two times, less a margin for clocks (results carry their
executor's clock, approved records their worker's), found through the broker's time index:
an empty folder reads the last day's results, not a month's, and writes them to the store in
batches as it reads.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from runonce.connectors.executor.batch import ResultLookups
from runonce.connectors.executor.result_store import IndexEntry, ResultStore
from runonce.errors import BrokerUnavailable, InvalidInput
from runonce.kafka import clients, topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import fetched, written_ends
from runonce.wire.codec import Codec
from runonce.wire.results import Result, result_of


class Results(ResultLookups, Protocol):
    """The results index as the executor uses it: the lookups, and what its commits tell it."""

    def learn(self, entries: list[tuple[str, str, Result]], next_offsets: Mapping[int, int]) -> None: ...

    def restore(self, starts: Mapping[int, int]) -> int: ...

    def expire(self, limit: int = ...) -> int: ...

    def close(self) -> None: ...


log = logging.getLogger("runonce.executor")

#: how far two processes' clocks may disagree (results and approved records carry theirs)
CLOCK_MARGIN_MS = 5 * 60 * 1000
#: the key window when no policy says otherwise
DEFAULT_WINDOW_MS = 24 * 3600 * 1000
#: results a restore writes to the store at once (memory is bounded by this, not the window)
RESTORE_BATCH = 10_000
#: what the restore's reader fetches ahead at most. librdkafka's defaults (a 64 MB queue, 50 MB
#: fetches) held ~170 MB of a 2 M restore; the store's writes, not the fetches, set the pace.
#: A small queue alone is slow: a full queue postpones the next fetch by
#: ``fetch.queue.backoff.ms`` (1 s by default), so that wait is short. Reading 2 M results
#: alone: 75 MB peak, 18 s, vs 211 MB, 22 s with a 16 MB queue (docs/measured.md).
READER_BUFFER = {"queued.max.messages.kbytes": 1024, "fetch.max.bytes": 1024 * 1024,
                 "max.partition.fetch.bytes": 256 * 1024, "fetch.queue.backoff.ms": 5}
#: the group the index's readers name (they only assign: the executor's ACLs allow the prefix)
READER_GROUP = "runonce-reader-results-window"


class ResultIndex:
    """The executor's results index: a ``ResultStore`` on disk, kept up to date from
    ``actions.results`` (read_committed) for the partitions the executor owns."""

    def __init__(self, bootstrap: KafkaTarget, tools: frozenset[str], store: ResultStore, codec: Codec | None = None,
                 timeout_s: float = 60.0, *, window_ms: int = DEFAULT_WINDOW_MS, source_topic: str = topics.APPROVED,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.bootstrap = bootstrap
        self.tools = tools
        self.store = store
        self.codec = codec or Codec()
        self.timeout_s = timeout_s
        #: the longest key TTL of the policies: how long a vendor key's first user matters
        self.window_ms = window_ms
        self.source_topic = source_topic
        self.clock_ms = clock_ms
        #: records on actions.results that are no ActionResult (a foreign writer's), counted and logged
        self.unreadable = 0

    # -- what the executor asks, and tells -------------------------------------------
    def result(self, action_id: str) -> Result | None:
        return self.store.result(action_id)

    def first_user(self, vendor_key: str) -> str | None:
        return self.store.first_user(vendor_key, self.clock_ms() - CLOCK_MARGIN_MS)

    def learn(self, entries: list[tuple[str, str, Result]], next_offsets: Mapping[int, int]) -> None:
        """Results this executor committed (action id, vendor key, result), and the end of its
        transaction on each results partition: one write batch."""
        now = self.clock_ms()
        self.store.write((IndexEntry(a, k, r, now) for a, k, r in entries), next_offsets)

    def expire(self, limit: int = 20_000) -> int:
        """Entries older than the key window (and the clock margin) go; ``limit`` a call."""
        return self.store.drop_before(self.clock_ms() - self.window_ms - CLOCK_MARGIN_MS, limit)

    def close(self) -> None:
        self.store.close()

    # -- restore ---------------------------------------------------------------------
    def restore(self, starts: Mapping[int, int]) -> int:
        """Bring the store up to the end of the results partitions of these approved
        partitions (partition -> the offset the executor's reading starts at), read_committed;
        returns records applied. A partition the store knows is read from the offset it is
        complete up to; one it does not know, from what can still matter (the module's
        docstring), in write batches of ``RESTORE_BATCH``: never the window in memory.

        "The end" is the end as written when the restore starts, not the last stable offset a
        read_committed reader stops at: executors of other vendors write to the same
        partitions, and a transaction of theirs still open (or left by one that died, until
        the broker aborts it) may lie before this executor's own last intents."""
        if not starts:
            return 0
        view = clients.written_view(self.bootstrap, READER_GROUP)
        try:
            ends = written_ends(view, topics.RESULTS, starts)
            begin = self._begin(view, starts, ends)
        finally:
            view.close()
        reader = clients.reader(self.bootstrap, group=READER_GROUP, to_end=True, **READER_BUFFER)
        try:
            return self._read(reader, begin, ends)
        finally:
            reader.close()

    def _begin(self, view: Consumer, starts: Mapping[int, int], ends: Mapping[int, int]) -> dict[int, int]:
        """Where to read each partition from; ``view`` a ``clients.written_view``: by time, a
        read_committed lookup finds nothing past the first open transaction, and the reading
        would start at the end, past this executor's own intents."""
        known = self.store.next_offsets()
        beyond = sorted(p for p in starts if known.get(p, 0) > ends[p])
        if beyond:  # not the topic this store was filled from (recreated): start over
            log.warning("results index: %s holds offsets beyond the end of %s %s; starting it over",
                        self.store.path, topics.RESULTS, beyond)
            self.store.wipe()
            known = {}
        begin = {p: known[p] for p in starts if p in known}
        unknown = sorted(p for p in starts if p not in known)
        if unknown:
            since_ms = max(min(self.clock_ms() - self.window_ms, self._first_unread_ms(
                {p: starts[p] for p in unknown})) - CLOCK_MARGIN_MS, 0)
            try:
                found = view.offsets_for_times([TopicPartition(topics.RESULTS, p, since_ms) for p in unknown],
                                                 timeout=10)
            except KafkaException as exc:
                raise clients.translate(exc, f"looking up {topics.RESULTS} by time") from exc
            for tp in found:  # -1: nothing at or after that time: the end
                begin[tp.partition] = tp.offset if tp.offset >= 0 else ends[tp.partition]
        return begin

    def _read(self, reader: Consumer, begin: Mapping[int, int], ends: Mapping[int, int]) -> int:
        reader.assign([TopicPartition(topics.RESULTS, p, o) for p, o in begin.items()])
        pending = set(begin)
        reached = dict(begin)
        entries: list[IndexEntry] = []
        applied = 0
        deadline = time.monotonic() + self.timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise BrokerUnavailable(
                    f"reading {topics.RESULTS} did not reach its end within {self.timeout_s:.0f} s (partitions "
                    f"{sorted(pending)} pending: read up to {[reached[p] for p in sorted(pending)]} of "
                    f"{[ends[p] for p in sorted(pending)]}; a transaction still open there, if the reading "
                    f"stopped short: docs/operating.md, 'A transaction left hanging')")
            for msg in fetched(reader, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        reached[msg.partition()] = max(reached[msg.partition()], msg.offset())
                        # EOF at the last stable offset: below the end, a transaction is still
                        # open; the reader reports EOF again once its markers move that offset.
                        if msg.offset() >= ends[msg.partition()]:
                            pending.discard(msg.partition())
                        continue
                    raise clients.translate(err, f"reading {topics.RESULTS}")
                reached[msg.partition()] = msg.offset() + 1
                entry = self._entry(msg)
                if entry is not None:
                    entries.append(entry)
                if len(entries) >= RESTORE_BATCH:
                    applied += self.store.write(entries, reached)
                    entries = []
                    deadline = time.monotonic() + self.timeout_s  # progress: the wait is for a stall
        applied += self.store.write(entries, reached)
        return applied

    def _entry(self, msg: Message) -> IndexEntry | None:
        value = msg.value()
        if value is None:
            return None
        try:
            _, r = self.codec.decode(value, expect="ActionResult")
        except InvalidInput as exc:  # not an executor's: it tells nothing about any action
            self.unreadable += 1
            log.warning("results: skipped an unreadable record at %s[%d]@%d: %s",
                        msg.topic(), msg.partition(), msg.offset(), exc)
            return None
        if r["tool"] not in self.tools:
            return None
        # the vendor key the executor wrote (a tenant's own), else the action id
        return IndexEntry(r["action_id"], r["idempotency_key"] or r["action_id"], result_of(r), msg.timestamp()[1])

    def _first_unread_ms(self, starts: Mapping[int, int]) -> int:
        """When the earliest approved record still to be read was written (now, if none is)."""
        earliest = self.clock_ms()
        reader = clients.reader(self.bootstrap, group=READER_GROUP, to_end=True)
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
