"""The agent SDK: submit an intended action, get its outcome.

    client = ActionClient(bootstrap)
    handle = client.submit("send_email", {"to": ..., "body": ...}, idempotency_key="followup-42")
    result = handle.result(timeout=30)      # or: await handle

A duplicate's handle resolves to the *original* action's outcome: the second call returns
the first call's result, not an error (the idempotency contract). A drop that repeats no
action (a denied tool, a missing key, an exhausted budget) resolves to that decision.

``client.tool("send_email")`` turns a function's keyword arguments into an action, for
LangChain- or OpenAI-style tool definitions (no import of either).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Generator, Mapping

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from runonce.core.policy import PolicyBook
from runonce.errors import BrokerUnavailable, ResultTimeout, RunonceError
from runonce.kafka import clients, topics
from runonce.kafka.access import KafkaTarget
from runonce.sdk.submit import Submitter
from runonce.sdk.watch import DecisionWatcher
from runonce.wire.codec import Codec
from runonce.wire.decisions import DecisionView
from runonce.wire.results import DROPPED, Status


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    action_id: str
    #: the executor's status (succeeded, failed, in_doubt), or "dropped" when runonce dropped it
    status: str
    #: the action whose result this is (the original, for a duplicate)
    result_of: str
    vendor_ref: str | None = None
    error: str | None = None
    #: why runonce dropped it, when it has no result of its own (denied, budget, key misuse)
    drop_reason: str | None = None
    #: for a repeat that resolved to its original's result: why it was a repeat
    repeat_reason: str | None = None

    @property
    def repeated(self) -> bool:
        """This call was not performed: it repeats ``result_of``, whose result this is."""
        return self.result_of != self.action_id and self.drop_reason is None


class ResultWatcher:
    """Tails actions.results (from its end at start-up) and indexes the final results."""

    def __init__(self, bootstrap: KafkaTarget) -> None:
        self.codec = Codec()
        self.final: dict[str, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._consumer = clients.reader(bootstrap, group=f"runonce-sdk-{uuid.uuid4().hex[:8]}",
                                        **{"enable.partition.eof": False})
        meta = self._consumer.list_topics(topics.RESULTS, timeout=10).topics[topics.RESULTS]
        # From the beginning: results are compacted by action id, and an original's result
        # may predate this client.
        self._consumer.assign([TopicPartition(topics.RESULTS, p, OFFSET_BEGINNING) for p in meta.partitions])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self._consumer.consume(500, 0.2):
                if msg.error() or msg.value() is None:
                    continue
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
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


class Handle:
    def __init__(self, client: ActionClient, action_id: str) -> None:
        self.client = client
        self.action_id = action_id

    def result(self, timeout: float = 60.0) -> ActionOutcome:
        return self.client._resolve(self.action_id, time.monotonic() + timeout)

    def __await__(self) -> Generator[Any, None, ActionOutcome]:
        return asyncio.get_running_loop().run_in_executor(None, self.result).__await__()


class ActionClient:
    def __init__(self, bootstrap: KafkaTarget, *, agent_id: str = "agent", policies: PolicyBook | None = None) -> None:
        self.policies = policies or PolicyBook.load()
        try:
            self._submitter = Submitter(bootstrap, agent_id=agent_id, policies=self.policies)
            self._decisions = DecisionWatcher(bootstrap)
            self._results = ResultWatcher(bootstrap)
        except Exception as exc:  # confluent_kafka raises KafkaException; its message names the cause
            raise BrokerUnavailable(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
        self._warned: set[str] = set()

    def submit(self, tool: str, params: Mapping[str, Any], *, idempotency_key: str | None = None,
               natural_id: str | None = None, agent_id: str | None = None) -> Handle:
        """Publish the action and return a handle on its outcome. ``agent_id`` overrides the
        client's own (a gateway serving several agents)."""
        if not self.policies.for_tool(tool).named and tool not in self._warned:
            self._warned.add(tool)
            warnings.warn(f"no runonce policy names tool {tool!r}: it gets the [default] policy", stacklevel=2)
        action_id = self._submitter.submit(tool, params, idempotency_key=idempotency_key, natural_id=natural_id,
                                           agent_id=agent_id)
        self._submitter.flush()
        return Handle(self, action_id)

    def _resolve(self, action_id: str, deadline: float) -> ActionOutcome:
        seen: set[str] = set()
        current = action_id
        repeat_reason: str | None = None
        while True:
            try:
                decided = self._decisions.wait([current], timeout_s=max(0.0, deadline - time.monotonic()))
            except TimeoutError as exc:
                raise ResultTimeout(f"action {action_id} not decided yet (is a stream worker running?)") from exc
            decision = DecisionView.of(decided[current])
            if decision.approved:
                r = self._results.wait(current, deadline)
                return ActionOutcome(action_id, r["status"], current, r["vendor_ref"], r["error"],
                                     repeat_reason=repeat_reason)
            first = decision.first_action_id
            if first is None or first in seen or not decision.resolves_to_original:
                return ActionOutcome(action_id, DROPPED, current, drop_reason=decision.reason.value)
            seen.add(current)
            repeat_reason = repeat_reason or decision.reason.value
            current = first  # a duplicate: the original's outcome is this call's outcome

    def tool(self, name: str, *, key_from: str | None = "idempotency_key") -> Callable[[Callable[..., Any]], Callable[..., ActionOutcome]]:
        """Decorate a tool function: calling it submits the action and waits for its outcome.
        The function body is the tool's description (its docstring) and is not run."""

        def wrap(fn: Callable[..., Any]) -> Callable[..., ActionOutcome]:
            @functools.wraps(fn)
            def call(*args: Any, timeout: float = 60.0, **kwargs: Any) -> ActionOutcome:
                if args:
                    raise RunonceError(f"tool {name}: pass arguments by name")
                key = kwargs.pop(key_from, None) if key_from else None
                return self.submit(name, kwargs, idempotency_key=key).result(timeout)

            return call

        return wrap

    def close(self) -> None:
        self._submitter.flush()
        self._decisions.close()
        self._results.close()

    def __enter__(self) -> ActionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

