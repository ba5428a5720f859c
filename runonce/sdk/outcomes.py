"""Where an agent's handles get their outcomes, with memory and start-up bounded by what the
client waits for, never by the size of the topics.

- **One tail per client**: one consumer on ``actions.approved``, ``actions.dropped`` and
  ``actions.results``, positioned at their ends when the client starts (explicit offsets, read
  before the first submit: no clock is involved, and no decision of this client's actions can
  come before them). It keeps the decisions and results of the actions this client submitted
  (``watch`` before producing) and, in a small cache bounded by count and age, the latest
  results of everyone else's actions.
- **Looking back for an original**: a repeat names its original (``first_action_id`` and its
  place in ``actions.requested``). The original's decision and result are on the partition of
  its output key, written after it was requested: one read of the original request gives
  both, and a scan of that one partition of each topic from that time (``offsets_for_times``)
  finds them; it stops as soon as it has them, so it reads about as far as the original took
  to be performed. Nothing is read from the beginning of a topic.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from confluent_kafka import KafkaError, TopicPartition

from runonce.core.action import Action
from runonce.core.decide import dedup_key
from runonce.core.policy import PolicyBook
from runonce.errors import InvalidInput, ResultTimeout
from runonce.kafka import clients, topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.partitioner import partition_for
from runonce.kafka.reader import Tail, ends, positions_at, read_to_end
from runonce.wire.codec import Codec
from runonce.wire.headers import H_POLICIES, H_RECEIPT
from runonce.wire.keys import decision_key
from runonce.wire.results import Status

log = logging.getLogger("runonce.sdk")

_T = TypeVar("_T")

#: an original's decision and result are searched from this long before its request
#: (producer and broker clocks may differ)
LOOKBACK_MARGIN_MS = 60_000
#: where a result read here keeps its receipt's proof (no field of ActionResult's)
RECEIPT = "runonce.receipt"


class RecentResults:
    """The latest final result per action id, at most ``max_entries`` and ``max_age_s`` old."""

    def __init__(self, max_entries: int = 10_000, max_age_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries, self.max_age_s, self._clock = max_entries, max_age_s, clock
        self._items: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()

    def put(self, action_id: str, result: dict[str, Any]) -> None:
        self._items[action_id] = (self._clock(), result)
        self._items.move_to_end(action_id)
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)

    def get(self, action_id: str) -> dict[str, Any] | None:
        item = self._items.get(action_id)
        if item is None:
            return None
        if self._clock() - item[0] > self.max_age_s:
            del self._items[action_id]
            return None
        return item[1]

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, slots=True)
class Looked:
    """What a look back found for an original: its decision and its final result, if any yet."""

    decision: dict[str, Any] | None
    result: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Requested:
    """A request record as read back from its place in actions.requested."""

    record: dict[str, Any]
    at_ms: int  # the record's Kafka timestamp: where a look back starts reading its outcome


class Outcomes:
    def __init__(self, target: KafkaTarget, policies: PolicyBook, *, codec: Codec | None = None,
                 recent: RecentResults | None = None, connect_timeout_s: float = 10.0) -> None:
        self.target, self.policies = target, policies
        self.codec = codec or Codec()
        self.recent = recent or RecentResults()
        self._cond = threading.Condition()
        #: policy digests of decisions that differed from ours, each warned of once
        self._warned_policies: set[str] = set()
        #: action ids handles wait for (how many handles each) -> their decision / final result, once seen
        self._watched: Counter[str] = Counter()
        self._decisions: dict[str, dict[str, Any]] = {}
        #: watched actions held for a person's approval (their HELD record), until decided
        self._held: dict[str, dict[str, Any]] = {}
        self._results: dict[str, dict[str, Any]] = {}
        #: records looking back found unreadable (a foreign writer's): counted, logged
        self._unreadable_looking_back = 0
        consumer = clients.reader(target, group=f"runonce-sdk-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": False})
        starts = ends(consumer, (topics.APPROVED, topics.DROPPED, topics.RESULTS, topics.HELD), connect_timeout_s)
        #: decisions and results share partition numbers (the executor writes a result to its
        #: approved record's partition number)
        self._partitions = sum(1 for tp in starts if tp.topic == topics.APPROVED)
        self._tail = Tail(consumer, starts, self._take, "runonce-outcomes")

    @property
    def undecodable(self) -> int:
        """Records on the outcome topics this client could not read (a foreign writer's)."""
        return self._tail.unreadable + self._unreadable_looking_back

    # -- the tail's handler (called on its thread) -----------------------------------------
    def _take(self, msg: Any) -> None:
        if msg.topic() == topics.RESULTS:
            _, r = self.codec.decode(msg.value(), expect="ActionResult")
            if Status(r["status"]).final:
                self._seen_result(_with_receipt(r, msg))
        else:
            _, d = self.codec.decode(msg.value(), expect="ActionDecision")
            action_id = d["request"]["action_id"]
            if action_id in self._watched:
                self._compare_policies(msg, action_id)
                with self._cond:
                    if msg.topic() == topics.HELD:  # not a decision yet: a person decides
                        self._held.setdefault(action_id, d)
                    else:
                        self._decisions.setdefault(action_id, d)
                    self._cond.notify_all()

    def _compare_policies(self, msg: Any, action_id: str) -> None:
        """Warn once per digest when the worker decided with other policies than this process
        loaded (another RUNONCE_POLICY_FILE): what a gateway serves and tells a model would not
        be what runonce enforces. A decision without the header (an older worker) says nothing."""
        theirs = next((value.decode("ascii", "replace") for name, value in (msg.headers() or [])
                       if name == H_POLICIES and value), None)
        if theirs is None or theirs == self.policies.digest or theirs in self._warned_policies:
            return
        self._warned_policies.add(theirs)
        log.warning("the stream worker decided action %s with other policies (digest %s) than this process "
                    "loaded (digest %s): give the worker and this process the same RUNONCE_POLICY_FILE",
                    action_id, theirs, self.policies.digest)

    def _seen_result(self, r: dict[str, Any]) -> None:
        action_id = r["action_id"]
        with self._cond:
            self.recent.put(action_id, r)
            if action_id in self._watched:
                self._results[action_id] = r
            self._cond.notify_all()

    def watch(self, action_id: str) -> None:
        """Keep what arrives for this action (call before it is produced)."""
        with self._cond:
            self._watched[action_id] += 1

    def forget(self, action_id: str) -> None:
        """One handle no longer waits for this action; the last one lets its entries go."""
        with self._cond:
            self._watched[action_id] -= 1
            if self._watched[action_id] <= 0:
                del self._watched[action_id]
                self._decisions.pop(action_id, None)
                self._results.pop(action_id, None)
                self._held.pop(action_id, None)

    @property
    def watched(self) -> int:
        """Actions some handle waits for: what this client's memory grows with."""
        return len(self._watched)

    def held(self, action_id: str) -> dict[str, Any] | None:
        """The HELD record of a watched action waiting for a person's approval, if the tail saw one."""
        with self._cond:
            return self._held.get(action_id)

    def decision(self, action_id: str, deadline: float) -> dict[str, Any]:
        return self._wait(lambda: self._decisions.get(action_id), deadline,
                          f"action {action_id} not decided yet (is a stream worker running?)")

    def result(self, action_id: str, deadline: float) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            return self._results.get(action_id) or self.recent.get(action_id)

        return self._wait(ready, deadline, f"no result for action {action_id} yet (is its executor running?)")

    def next_of(self, action_id: str, deadline: float) -> Looked:
        """Wait for a watched action's decision or result, whichever the tail sees first."""
        def ready() -> Looked | None:
            result = self._results.get(action_id) or self.recent.get(action_id)
            decision = self._decisions.get(action_id)
            return Looked(decision, result) if result is not None or decision is not None else None

        return self._wait(ready, deadline, f"no outcome for action {action_id} yet")

    def _wait(self, ready: Callable[[], _T | None], deadline: float, what: str) -> _T:
        with self._cond:
            while True:
                found = ready()
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ResultTimeout(what)
                self._cond.wait(min(left, 0.5))

    # -- looking back --------------------------------------------------------------------
    def look_back(self, action_id: str, requested_at: tuple[int, int] | Requested,
                  deadline: float) -> Looked:
        """The final result (else the decision) of an earlier action, a repeat's original: read
        from the one partition that holds them, from the time it was requested, comparing
        Kafka keys before decoding anything (results are keyed by action id, decisions by the
        output key), and stopping at the first match. Given the request already read (a
        task's poll reads it first to know whose it is), it is not read again."""
        with self._cond:
            known = self.recent.get(action_id)
        if known is not None:
            return Looked(None, known)
        reader = clients.reader(self.target, group=f"runonce-sdk-{uuid.uuid4().hex[:8]}", to_end=True,
                                **{"fetch.max.bytes": 4 * 1024 * 1024, "queued.max.messages.kbytes": 8192})
        try:
            request = (requested_at if isinstance(requested_at, Requested)
                       else _read_one(reader, self.codec, topics.REQUESTED, *requested_at, deadline))
            output_key = self._output_key(request.record)
            partition = partition_for(output_key, self._partitions)  # its result's too (result_partition)
            since_ms = request.at_ms - LOOKBACK_MARGIN_MS

            def starts(*names: str) -> list[TopicPartition]:
                return [tp for tp in positions_at(reader, names, since_ms) if tp.partition == partition]

            wanted = action_id.encode()
            for msg in read_to_end(reader, starts(topics.RESULTS), deadline):
                if msg.key() == wanted:
                    r = self._readable(msg, "ActionResult")
                    if r is not None and Status(r["status"]).final:
                        r = _with_receipt(r, msg)
                        self._seen_result(r)
                        return Looked(None, r)  # the original's result: all a repeat needs
            decision = self._decision_of(reader, action_id, output_key, starts(topics.APPROVED, topics.DROPPED),
                                         deadline)
            return Looked(decision, None)  # decided, not (yet) performed; None: still in flight
        finally:
            reader.close()

    def held_back(self, action_id: str, request: Requested, deadline: float) -> dict[str, Any] | None:
        """The HELD record of an action (its ``hold_partition`` is where its verdicts and its
        agent's cancel go), seen by the tail or read back from the partition its decisions
        are on since it was requested; None: it was not held (or not yet)."""
        with self._cond:
            known = self._held.get(action_id)
        if known is not None:
            return known
        reader = clients.reader(self.target, group=f"runonce-sdk-{uuid.uuid4().hex[:8]}", to_end=True)
        try:
            output_key = self._output_key(request.record)
            partition = partition_for(output_key, self._partitions)
            starts = [tp for tp in positions_at(reader, (topics.HELD,), request.at_ms - LOOKBACK_MARGIN_MS)
                      if tp.partition == partition]
            return self._decision_of(reader, action_id, output_key, starts, deadline)
        finally:
            reader.close()

    def _decision_of(self, reader: Any, action_id: str, output_key: str, starts: list[TopicPartition],
                     deadline: float) -> dict[str, Any] | None:
        """The first decision of ``action_id`` from ``starts`` on, comparing Kafka keys first."""
        key = output_key.encode()
        for msg in read_to_end(reader, starts, deadline):
            if msg.key() == key:
                d = self._readable(msg, "ActionDecision")
                if d is not None and d["request"]["action_id"] == action_id:
                    return d
        return None

    def requested(self, requested_at: tuple[int, int], deadline: float) -> Requested:
        """The request record at this place in actions.requested."""
        reader = clients.reader(self.target, group=f"runonce-sdk-{uuid.uuid4().hex[:8]}", to_end=True)
        try:
            return _read_one(reader, self.codec, topics.REQUESTED, *requested_at, deadline)
        finally:
            reader.close()

    def _readable(self, msg: Any, expect: str) -> dict[str, Any] | None:
        """A record decoded, or None (counted, logged) for one a foreign writer put there."""
        try:
            return self.codec.decode(msg.value(), expect=expect)[1]
        except InvalidInput as exc:
            self._unreadable_looking_back += 1
            log.warning("outcomes: skipped an unreadable record on %s[%d]@%d: %s",
                        msg.topic(), msg.partition(), msg.offset(), exc)
            return None

    def _output_key(self, request: dict[str, Any]) -> str:
        """The key the stream job wrote its decision with (``wire.keys.decision_key``)."""
        try:
            action = Action.from_record(request, self.policies)
            return decision_key(dedup_key(action, self.policies.for_tool(action.tool)), action.action_id)
        except InvalidInput:
            return decision_key(None, str(request["action_id"]))

    def close(self) -> None:
        self._tail.close()


def _read_one(reader: Any, codec: Codec, topic: str, partition: int, offset: int,
              deadline: float) -> Requested:
    reader.assign([TopicPartition(topic, partition, offset)])
    while time.monotonic() < deadline:
        for msg in reader.consume(1, 0.2):
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise clients.translate(msg.error(), f"reading {topic}[{partition}]@{offset}")
            _, request = codec.decode(msg.value(), expect="ActionRequested")
            return Requested(request, int(msg.timestamp()[1]))
    raise ResultTimeout(f"{topic}[{partition}]@{offset} not read in time")


def _with_receipt(result: dict[str, Any], msg: Any) -> dict[str, Any]:
    """A final result with its receipt's proof, when its executor signs (the ``runonce.receipt``
    header: connectors/executor/receipts.py), kept as the line ``runonce audit verify`` reads."""
    proof = next((value for name, value in (msg.headers() or []) if name == H_RECEIPT), None)
    return {**result, RECEIPT: proof.decode("utf-8")} if proof else result

