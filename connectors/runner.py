"""The per-action protocol of an executor, apart from Kafka: intent before effect, retries
with the same vendor key, and reconciliation of an action whose intent exists without a
result. A timeout is "outcome unknown", never "failed"."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Callable

from runonce.connectors.base import ActionCall, Capability, Connector
from runonce.connectors.errors import ConnectorError, OutcomeUnknown, PermanentVendorError, TransientVendorError


class Status(enum.Enum):
    ATTEMPTING = "attempting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    IN_DOUBT = "in_doubt"

    @property
    def final(self) -> bool:
        return self is not Status.ATTEMPTING


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Status
    vendor_ref: str | None = None
    error: str | None = None
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    base_backoff_s: float = 0.2
    max_backoff_s: float = 5.0

    def backoff_s(self, attempt: int) -> float:
        return float(min(self.max_backoff_s, self.base_backoff_s * 2 ** (attempt - 1)))


class ActionRunner:
    def __init__(self, connector: Connector, retry: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.connector = connector
        self.retry = retry
        self.sleep = sleep

    def run(self, call: ActionCall, prior: Outcome | None, write_intent: Callable[[], None]) -> Outcome | None:
        """The outcome to record, or None when a final result already exists (nothing to do)."""
        if prior is not None and prior.status.final:
            return None
        if prior is not None:  # intent without result: we crashed somewhere after writing it
            return self.reconcile(call, prior.attempts)
        write_intent()
        return self._perform(call, attempts_before=0)

    def reconcile(self, call: ActionCall, attempts_before: int) -> Outcome:
        capability = self.connector.capability
        if capability is Capability.NONE:
            return Outcome(Status.IN_DOUBT, error="redelivered after an intent without a result; "
                           f"{self.connector.name} cannot tell whether it happened, so it was not repeated",
                           attempts=attempts_before)
        if capability is Capability.STATE_CHECK:
            found = self._check(call)
            if found is not None:
                return Outcome(Status.SUCCEEDED, found.vendor_ref, attempts=attempts_before)
        return self._perform(call, attempts_before)  # VENDOR_KEY: the vendor replays a repeat

    def _check(self, call: ActionCall) -> object | None:
        try:
            return self.connector.check(call)
        except ConnectorError:
            return None

    def _perform(self, call: ActionCall, attempts_before: int) -> Outcome:
        unknown: str | None = None
        last_error = ""
        attempt = 0
        for attempt in range(1, self.retry.max_attempts + 1):
            try:
                response = self.connector.perform(call)
                return Outcome(Status.SUCCEEDED, response.vendor_ref, attempts=attempts_before + attempt)
            except PermanentVendorError as exc:
                return Outcome(Status.FAILED, error=str(exc), attempts=attempts_before + attempt)
            except OutcomeUnknown as exc:
                unknown = last_error = str(exc)
                if self.connector.capability is Capability.NONE:
                    return Outcome(Status.IN_DOUBT, error=str(exc), attempts=attempts_before + attempt)
                if self.connector.capability is Capability.STATE_CHECK:
                    found = self._check(call)
                    if found is not None:
                        return Outcome(Status.SUCCEEDED, getattr(found, "vendor_ref", None),
                                       attempts=attempts_before + attempt)
            except TransientVendorError as exc:
                last_error = str(exc)
            if attempt < self.retry.max_attempts:
                self.sleep(self.retry.backoff_s(attempt))
        status = Status.IN_DOUBT if unknown else Status.FAILED
        return Outcome(status, error=f"gave up after {attempt} attempts: {last_error}",
                       attempts=attempts_before + attempt)
