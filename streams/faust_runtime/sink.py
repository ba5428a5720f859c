"""Sending the stream job's records through faust, and refusing to lose one.

faust's buffered send (``send_soon``) only logs a warning when a record cannot be
written, and would then commit the input offset past it: the decision, dead letter or
changelog entry would be gone without a trace. Two guards close that:

* ``SendFailureGuard`` (a faust sensor) sees every failed send of the app's producer and
  stops the worker at once, before the next offset commit; the supervisor restarts it
  from the last commit and the input is decided again (harmless by design).
* Dead letters are rare and are the last place a bad record can go, so ``FaustSink``
  awaits each one and retries a definite failure a bounded number of times; then it
  raises ``DeadLetterUnwritable`` and the worker stops (``streams/faust_runtime/stop.py``) rather
  than skip the record.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable

import faust
from faust.sensors import Sensor

from runonce.errors import FatalError
from runonce.kafka import topics
from runonce.kafka.record import Headers, Out
from runonce.streams.faust_runtime.stop import stop_before_ack

log = logging.getLogger("runonce.streams")


class DeadLetterUnwritable(FatalError):
    """actions.dlq refused a dead letter after bounded retries; the worker stops."""


class SendFailureGuard(Sensor):
    """Stop the worker on any failed send except dead letters (``FaustSink`` retries those)."""

    def __init__(self, on_fatal: Callable[[str], None] = stop_before_ack, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_fatal = on_fatal

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int, valsize: int) -> Any:
        return topic

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        if state == topics.DLQ:
            return
        self.on_fatal(f"could not write a record to {state}: {exc!r}")


class FaustSink:
    def __init__(self, app: faust.App, names: Iterable[str], partitions: int, *, dead_letter_attempts: int = 3,
                 dead_letter_timeout_s: float = 60.0, backoff_s: float = 0.5) -> None:
        self._topics = {name: app.topic(name, key_type=bytes, value_type=bytes, partitions=partitions)
                        for name in names}
        self.dead_letter_attempts = dead_letter_attempts
        self.dead_letter_timeout_s = dead_letter_timeout_s
        self.backoff_s = backoff_s

    async def send(self, out: Out) -> None:
        if out.topic == topics.DLQ:
            await self._dead_letter(out.key, out.value, out.partition, out.headers)
            return
        # Buffered, not awaited per record: the producer is drained and acknowledged before
        # faust commits offsets (drain.py), so an output is durable before its input is.
        self._topics[out.topic].send_soon(key=out.key, value=out.value, partition=out.partition,
                                          headers=list(out.headers) or None)

    async def _dead_letter(self, key: bytes | None, value: bytes | None, partition: int | None, headers: Headers) -> None:
        last: BaseException | None = None
        for attempt in range(1, self.dead_letter_attempts + 1):
            try:
                delivery = asyncio.ensure_future(await self._topics[topics.DLQ].send(
                    key=key, value=value, partition=partition, headers=list(headers) or None))
                done, _ = await asyncio.wait({delivery}, timeout=self.dead_letter_timeout_s)
            except Exception as exc:  # noqa: BLE001  faust/aiokafka raise many types; all mean "not written"
                last = exc
            else:
                if not done:
                    # Outcome unknown: a retry could write the dead letter twice. Stop instead.
                    raise DeadLetterUnwritable(f"no answer from {topics.DLQ} within {self.dead_letter_timeout_s:.0f} s")
                if delivery.exception() is None:
                    return
                last = delivery.exception()
            log.warning("dead letter not written (attempt %d of %d): %r", attempt, self.dead_letter_attempts, last)
            if attempt < self.dead_letter_attempts:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        raise DeadLetterUnwritable(f"{topics.DLQ} refused a dead letter {self.dead_letter_attempts} times; "
                                   f"last error: {last!r}") from last
