"""Background readers that index every decision (approved/dropped/held/dlq) and every final result
from the beginning of the topics, for the demo, tests and benchmarks, which want to see all of
them. Agents do not use these: the SDK's ``runonce/sdk/outcomes.py`` reads only what its
handles need, from the client's start."""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from typing import Any, Iterable

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from runonce.core.decision import Outcome
from runonce.errors import ResultTimeout
from runonce.kafka import clients, topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import Tail
from runonce.wire.codec import Codec
from runonce.wire.headers import H_ORIGIN_OFFSET, H_ORIGIN_PARTITION, H_ORIGIN_TOPIC
from runonce.wire.results import Status


class DecisionWatcher:
    def __init__(self, bootstrap: KafkaTarget) -> None:
        self.codec = Codec()
        self.by_action: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.dead: dict[tuple[int, int], dict[str, str]] = {}
        self.headers_by_action: dict[str, list[dict[str, bytes]]] = defaultdict(list)
        self._lock = threading.Lock()
        consumer = clients.reader(bootstrap, group=f"runonce-watch-{uuid.uuid4().hex[:6]}",
                                  **{"enable.partition.eof": False})
        self._tail = Tail(consumer, _beginnings(consumer, (topics.APPROVED, topics.DROPPED, topics.HELD, topics.DLQ)),
                          self._take, "runonce-decision-watcher", tombstones=True)

    def _take(self, msg: Any) -> None:
        with self._lock:
            if msg.topic() == topics.DLQ:
                h = {k: _text(v) for k, v in _pairs(msg.headers())}
                if h.get(H_ORIGIN_TOPIC) == topics.REQUESTED:  # not a foreign internal record
                    self.dead[(int(h[H_ORIGIN_PARTITION]), int(h[H_ORIGIN_OFFSET]))] = h
            else:
                _, d = self.codec.decode(msg.value(), expect="ActionDecision")
                self.by_action[d["request"]["action_id"]].append(d)
                self.headers_by_action[d["request"]["action_id"]].append(
                    {k: v for k, v in _pairs(msg.headers()) if isinstance(v, bytes)})

    def decisions(self) -> list[dict[str, Any]]:
        """Every decision seen so far (a snapshot)."""
        with self._lock:
            return [d for ds in self.by_action.values() for d in ds]

    def wait(self, action_ids: Iterable[str], timeout_s: float = 60.0, *,
             final: bool = False) -> dict[str, dict[str, Any]]:
        """Each action's first decision (a hold is one); ``final``: its first that is not a hold."""
        ids = list(action_ids)
        deadline = time.monotonic() + timeout_s

        def first(action_id: str) -> dict[str, Any] | None:
            found = [d for d in self.by_action.get(action_id, ()) if not final or d["outcome"] != Outcome.HOLD.value]
            return found[0] if found else None

        while True:
            with self._lock:
                got = {a: first(a) for a in ids}
                missing = [a for a, d in got.items() if d is None]
                if not missing:
                    return {a: d for a, d in got.items() if d is not None}
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(missing)} of {len(ids)} actions undecided after {timeout_s:.0f} s "
                                   f"(is a stream worker running?): {missing[:3]}")
            time.sleep(0.1)

    def wait_dead(self, position: tuple[int, int], timeout_s: float = 60.0) -> dict[str, str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if position in self.dead:
                    return self.dead[position]
            time.sleep(0.1)
        raise TimeoutError(f"no dead letter for requested{list(position)} after {timeout_s:.0f} s")

    def __enter__(self) -> DecisionWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._tail.close()


def _beginnings(consumer: Any, names: tuple[str, ...]) -> list[TopicPartition]:
    out = []
    for name in names:
        meta = consumer.list_topics(name, timeout=10).topics[name]
        out += [TopicPartition(name, p, OFFSET_BEGINNING) for p in meta.partitions]
    return out


def _text(value: str | bytes | None) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def _pairs(headers: Any) -> list[tuple[str, str | bytes | None]]:
    """A message's headers as pairs (confluent-kafka's types also allow a dict)."""
    if isinstance(headers, dict):
        return list(headers.items())
    return list(headers or ())


class ResultWatcher:
    """Tails actions.results (from its end at start-up) and indexes the final results."""

    def __init__(self, bootstrap: KafkaTarget) -> None:
        self.codec = Codec()
        self.final: dict[str, dict[str, Any]] = {}
        self._cond = threading.Condition()
        consumer = clients.reader(bootstrap, group=f"runonce-sdk-{uuid.uuid4().hex[:8]}",
                                  **{"enable.partition.eof": False})
        # From the beginning: results are compacted by action id, and an original's result
        # may predate this client.
        self._tail = Tail(consumer, _beginnings(consumer, (topics.RESULTS,)), self._take, "runonce-result-watcher")

    def _take(self, msg: Any) -> None:
        _, r = self.codec.decode(msg.value(), expect="ActionResult")
        if Status(r["status"]).final:
            with self._cond:
                self.final[r["action_id"]] = r
                self._cond.notify_all()

    def wait(self, action_id: str, deadline: float) -> dict[str, Any]:
        with self._cond:
            while action_id not in self.final:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ResultTimeout(f"no result for action {action_id} yet (is its executor running?)")
                self._cond.wait(min(left, 0.5))
            return self.final[action_id]

    def close(self) -> None:
        self._tail.close()
