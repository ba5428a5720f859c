"""Publishing actions to actions.requested: the producing half of the agent SDK.

Records are keyed by idempotency key, or (given the policies) an unkeyed one by the content
key the stream job derives, so stage 1 decides them where they land, with no re-keying hop;
produced with an idempotent producer.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException

from runonce.core.content import canonical_json
from runonce.core.policy import PolicyBook
from runonce.core.tenant import DEFAULT_TENANT
from runonce.errors import BrokerUnavailable, InvalidAction
from runonce.kafka import clients, topics
from runonce.kafka.access import KafkaTarget
from runonce.wire.codec import Codec
from runonce.wire.keys import routing_key
from runonce.wire.trace import TraceHeaders

log = logging.getLogger("runonce.sdk")

#: delivered positions kept for the taking (a gateway takes each at once; a bare submitter never)
MAX_POSITIONS = 10_000
#: how long one wait for a request's own delivery polls the producer before it looks again
_POLL_SLICE_S = 0.05


@dataclass(slots=True)
class _Delivery:
    """One request's delivery, as its caller awaits it: its own error, never another's."""

    done: threading.Event = field(default_factory=threading.Event)
    error: KafkaError | None = None


def build_request(tool: str, params: Mapping[str, Any], *, agent_id: str, idempotency_key: str | None = None,
                  natural_id: str | None = None, action_id: str | None = None,
                  requested_at_ms: int | None = None, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
    try:
        params_json = canonical_json(dict(params))
    except (TypeError, ValueError) as exc:
        raise InvalidAction(f"params for {tool} cannot be serialized as JSON: {exc}") from exc
    return {
        "action_id": action_id or str(uuid.uuid4()),
        "agent_id": agent_id,
        "tool": tool,
        "params_json": params_json,
        "idempotency_key": idempotency_key,
        "natural_id": natural_id,
        "requested_at_ms": requested_at_ms if requested_at_ms is not None else int(time.time() * 1000),
        "tenant": tenant,
    }


class Submitter:
    def __init__(self, bootstrap: KafkaTarget, *, agent_id: str = "agent", codec: Codec | None = None,
                 timeout_s: float = 30.0, policies: PolicyBook | None = None, tenant: str = DEFAULT_TENANT) -> None:
        self.agent_id = agent_id
        self.tenant = tenant
        #: with policies, unkeyed actions are keyed by their content key (no re-key hop)
        self.policies = policies
        self.codec = codec or Codec()
        self.timeout_s = timeout_s
        # An agent waits on each submit: no linger (librdkafka's default holds a record 5 ms);
        # what arrives while a request is in flight still goes in the next one together.
        self._producer = clients.producer(bootstrap, **{"linger.ms": 0})
        #: errors of requests no caller awaits (``send`` without ``delivered``), for ``flush``
        self._errors: list[KafkaError] = []
        #: the requests whose callers await their own delivery (``delivered``), by action id
        self._awaited: dict[str, _Delivery] = {}
        #: the requests whose callers stopped waiting (answered "undelivered"): their late
        #: delivery or error is logged, and kept for no one
        self._abandoned: set[str] = set()
        #: where each delivered request landed, by action id, until ``position`` takes it
        self._positions: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._lock = threading.Lock()

    def submit(self, tool: str, params: Mapping[str, Any], *, idempotency_key: str | None = None,
               natural_id: str | None = None, action_id: str | None = None, agent_id: str | None = None) -> str:
        record = build_request(tool, params, agent_id=agent_id or self.agent_id, idempotency_key=idempotency_key,
                               natural_id=natural_id, action_id=action_id, tenant=self.tenant)
        self.send(record)
        return str(record["action_id"])

    def send(self, record: Mapping[str, Any], headers: TraceHeaders = ()) -> None:
        """``headers``: the caller's trace context (wire/trace.py), carried onto every record
        written for this action."""
        key = routing_key(record, self.policies)
        value = self.codec.encode("ActionRequested", dict(record))
        while True:
            try:
                self._producer.produce(topics.REQUESTED, key=key.encode(), value=value, headers=list(headers) or None,
                                       on_delivery=functools.partial(self._on_delivery, str(record["action_id"])))
                break
            except BufferError:
                self._producer.poll(0.1)  # local queue full: let deliveries drain
        self._producer.poll(0)

    def reachable(self, timeout_s: float) -> str | None:
        """None when the broker answers with ``actions.requested`` in its metadata (a publish can
        go out), else why not: a gateway's readiness."""
        try:
            meta = clients.metadata(self._producer, timeout_s, topics.REQUESTED).topics.get(topics.REQUESTED)
        except KafkaException as exc:
            return f"Kafka did not answer within {timeout_s:.0f} s: {exc.args[0].str() if exc.args else exc}"
        if meta is None or meta.error is not None:
            return f"{topics.REQUESTED}: {meta.error.str() if meta is not None and meta.error else 'no such topic'}"
        return None

    def _on_delivery(self, record_id: str, err: Any, msg: Any) -> None:
        """``record_id``: a request's action id, or a cancel's id."""
        with self._lock:
            awaited = self._awaited.get(record_id)
            abandoned = record_id in self._abandoned
            self._abandoned.discard(record_id)
        if awaited is not None:
            awaited.error = err
            awaited.done.set()
        elif abandoned:
            log.warning("record %s, whose caller was told it was undelivered, %s", record_id,
                        f"was not delivered either: {err}" if err is not None else "was delivered after all")
        if err is not None:
            if awaited is None and not abandoned:
                self._errors.append(err)
            return
        offset = msg.offset()
        if offset is None or msg.topic() != topics.REQUESTED:  # a cancel's place finds nothing
            # delivered, where unknown: confluent-kafka gives None for an offset librdkafka does
            # not know, as for a retry the broker had already written (DUPLICATE_SEQUENCE_NUMBER
            # after a leader's loss); the action is found by its id instead of its position
            return
        with self._lock:
            self._positions[record_id] = (int(msg.partition()), int(offset))
            while len(self._positions) > MAX_POSITIONS:  # positions nobody asked for
                self._positions.popitem(last=False)

    def position(self, action_id: str) -> tuple[int, int] | None:
        """Where a delivered request landed in actions.requested (partition, offset), once:
        what finds the action again from any process (``Outcomes.look_back``)."""
        with self._lock:
            return self._positions.pop(action_id, None)

    def delivered(self, record: Mapping[str, Any], headers: TraceHeaders = ()) -> None:
        """Send one request and wait for its own delivery: what its record met is raised here,
        and never what another's met. A gateway serves many callers on one producer; a request
        that timed out stays queued and may be delivered after a heal, or fail then: that late
        error is logged, and answers no one else's call."""
        action_id = str(record["action_id"])
        self._awaiting([action_id], f"action {action_id}", lambda: self.send(record, headers))

    def delivered_all(self, records: Sequence[tuple[Mapping[str, Any], TraceHeaders]]) -> None:
        """Send several requests and wait once for all their deliveries: they go out together
        (as many a produce request as fit), not a round trip each. What any of them met is
        raised here, naming how many and the first; the others may have been delivered (sent
        again with the same keys, those are repeats and resolve to their originals)."""
        ids = [str(record["action_id"]) for record, _ in records]

        def send() -> None:
            for record, headers in records:
                self.send(record, headers)

        self._awaiting(ids, f"{len(ids)} actions", send)

    def cancel(self, record: Mapping[str, Any], partition: int) -> None:
        """Send an agent's cancel of its held action (an ActionCancel) to actions.cancels, on the
        partition its held record names, and wait for its own delivery."""
        cancel_id, action_id = str(record["cancel_id"]), str(record["action_id"])
        value = self.codec.encode("ActionCancel", dict(record))

        def send() -> None:
            self._producer.produce(topics.CANCELS, key=action_id.encode(), value=value, partition=partition,
                                   on_delivery=functools.partial(self._on_delivery, cancel_id))
            self._producer.poll(0)

        self._awaiting([cancel_id], f"the cancel of action {action_id}", send)

    def _awaiting(self, record_ids: Sequence[str], what: str, send: Callable[[], None]) -> None:
        """``send`` records and wait for their own deliveries (by ``record_ids``)."""
        deliveries = {record_id: _Delivery() for record_id in record_ids}
        with self._lock:
            self._awaited.update(deliveries)
        deadline = time.monotonic() + self.timeout_s
        try:
            send()
            for delivery in deliveries.values():
                while not delivery.done.is_set():
                    left_s = deadline - time.monotonic()
                    if left_s <= 0:
                        undelivered = sum(1 for d in deliveries.values() if not d.done.is_set())
                        raise BrokerUnavailable(f"{what} undelivered after {self.timeout_s:.0f} s"
                                                if len(deliveries) == 1 else
                                                f"{undelivered} of {what} undelivered after {self.timeout_s:.0f} s")
                    try:
                        self._producer.poll(min(_POLL_SLICE_S, left_s))  # serves every caller's deliveries
                    except KafkaException as exc:
                        raise BrokerUnavailable(f"cannot deliver actions: {exc}") from exc
        finally:
            with self._lock:
                for record_id, delivery in deliveries.items():
                    self._awaited.pop(record_id, None)
                    if not delivery.done.is_set():
                        self._abandoned.add(record_id)
        failed = [(record_id, d.error) for record_id, d in deliveries.items() if d.error is not None]
        if failed:
            first_id, first = failed[0]
            where = f"{what} undelivered" if len(deliveries) == 1 else \
                f"{len(failed)} of {what} undelivered (first: action {first_id})"
            raise clients.translate(first, where) from None

    def flush(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        try:
            # in slices: a flush returns early on a failed handshake only at a slice's end
            # (clients.ConnectionWatch), and settings that cannot connect should fail in seconds
            left = self._producer.flush(min(1.0, self.timeout_s))
            while left and time.monotonic() < deadline:
                left = self._producer.flush(max(0.0, min(1.0, deadline - time.monotonic())))
        except KafkaException as exc:
            raise BrokerUnavailable(f"cannot deliver actions: {exc}") from exc
        if left or self._errors:
            errors, self._errors = self._errors, []
            what = f"{left + len(errors)} actions undelivered after {self.timeout_s:.0f} s"
            if errors:
                raise clients.translate(errors[0], f"{what}; first error") from None
            raise BrokerUnavailable(what)

    def __enter__(self) -> Submitter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()
