"""The per-action protocol of an executor, apart from Kafka: intent before effect, retries
with the same vendor key, and reconciliation of an action whose intent exists without a
result. A timeout is "outcome unknown", never "failed"; a state check that cannot answer is
an unknown too, never an absence: nothing is performed on a guess. Every call to the vendor
goes through its Throttle (limits.py): a refusal for its rate limit is not an attempt, it
pauses every call to that vendor."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from runonce.connectors.executor.batch import Plan
from runonce.connectors.executor.lease import NO_LEASE, Lease
from runonce.connectors.executor.throttle import Throttle
from runonce.connectors.toolkit.base import ActionCall, Capability, Connector, StateCheck, VendorResponse, state_check
from runonce.connectors.toolkit.errors import (
    ConnectorError,
    OutcomeUnknown,
    PermanentVendorError,
    RateLimited,
    TransientVendorError,
)
from runonce.wire.results import Result, Status


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    base_backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    #: a state check that errors is asked again this many times in all before the action is in_doubt
    check_attempts: int = 4
    #: while a vendor's check may still lag behind an effect, look again this often
    lag_poll_s: float = 1.0
    #: refusals for the vendor's rate limit one call takes (each after the vendor's pause)
    #: before it counts as one failed attempt
    max_rate_limited: int = 20

    def backoff_s(self, attempt: int) -> float:
        return float(min(self.max_backoff_s, self.base_backoff_s * 2 ** (attempt - 1)))


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Lapsed:
    """No outcome: the executor's lease ended before a vendor call could start (lease.py).
    Nothing is committed for the action; its record comes again."""

    #: whether an attempt of this call was made before (then only a reconcile may follow)
    attempted: bool


class _LeaseEnded(Exception):
    """Inside the runner only: the lease ended before a call."""


@dataclass(frozen=True, slots=True)
class Look:
    """What a state check said: found (``response``), absent, or no answer (``unanswered``)."""

    response: VendorResponse | None = None
    unanswered: str | None = None


class ActionRunner:
    def __init__(self, connector: Connector, retry: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 throttle: Throttle | None = None) -> None:
        self.connector = connector
        #: the vendor asked whether an effect happened: a STATE_CHECK connector's own check
        self.state: StateCheck | None = state_check(connector)
        self.retry = retry
        self.sleep = sleep
        self.clock = clock
        #: shared by every call to this vendor; none of our rate unless settings give one
        self.throttle = throttle or Throttle(connector.name, clock=clock, sleep=sleep)

    def carry_out(self, plan: Plan, call: ActionCall, prior: Result | None, lease: Lease = NO_LEASE
                  ) -> Result | Lapsed:
        """Step 2 of an executor's batch for one action planned PERFORM (its intent committed)
        or RECONCILE (an intent without a result). ``lease``: the executor's (lease.py); a
        vendor call starts only while it holds."""
        if plan is Plan.RECONCILE and prior is not None:
            return self.reconcile(call, prior.attempts, lease)
        assert plan is Plan.PERFORM, plan
        return self.perform(call, lease)

    def perform(self, call: ActionCall, lease: Lease = NO_LEASE) -> Result | Lapsed:
        """A new action, its intent committed: call the vendor (retries with the same key)."""
        return self._perform(call, 0, lease)

    def reconcile(self, call: ActionCall, attempts_before: int, lease: Lease = NO_LEASE) -> Result | Lapsed:
        capability = self.connector.capability
        if capability is Capability.NONE:
            return Result(Status.IN_DOUBT, error="redelivered after an intent without a result; "
                           f"{self.connector.name} cannot tell whether it happened, so it was not repeated",
                           attempts=attempts_before)
        if capability is Capability.STATE_CHECK:
            # An earlier attempt was made by a process that is gone, or that lost these partitions
            # and may still start one within its lease: "absent" counts only once a call it
            # started then has landed (lease.py).
            look = self.look(call, attempted_at=self.clock() + self.zombie_window_s(lease))
            if look.unanswered is not None:
                return self._in_doubt(look, attempts_before)
            if look.response is not None:
                return Result(Status.SUCCEEDED, look.response.vendor_ref, attempts=attempts_before)
        # VENDOR_KEY, NATURAL_KEY: the vendor refuses a repeat; ATOMIC: its marker is found first
        return self._perform(call, attempts_before, lease)

    def zombie_window_s(self, lease: Lease) -> float:
        """How long after a reconcile starts a state check's "absent" may still be a zombie's
        call in flight (none for a connector without a state check)."""
        return lease.zombie_window_s(self.state.timeout_s) if self.state is not None else 0.0

    def look(self, call: ActionCall, attempted_at: float) -> Look:
        """Ask the vendor whether the effect exists. An error is asked again (bounded), then is an
        unanswered look. "Absent" counts only from an answer given ``check_lag_s`` after
        ``attempted_at`` (the latest moment an earlier attempt can have had its effect): a search
        index may not show a ticket created a moment ago."""
        assert self.state is not None, "only a STATE_CHECK connector is looked at"
        settled_at = attempted_at + self.state.check_lag_s
        failures = 0
        while True:
            asked_at = self.clock()
            try:
                found = self._paced(self.state.check, call)
            except PermanentVendorError as exc:  # asking again cannot help
                return Look(unanswered=f"state check refused: {exc}")
            except (ConnectorError, TimeoutError) as exc:
                failures += 1
                if failures >= self.retry.check_attempts:
                    return Look(unanswered=f"state check unanswered after {failures} tries: "
                                           f"{type(exc).__name__}: {exc}")
                self.sleep(self.retry.backoff_s(failures))
                continue
            if found is not None:
                return Look(response=found)
            if asked_at >= settled_at:
                return Look()
            self.sleep(min(self.retry.lag_poll_s, settled_at - asked_at))

    def _paced(self, ask: Callable[[ActionCall], T], call: ActionCall, lease: Lease = NO_LEASE) -> T:
        """One request as the vendor's pace allows; a refusal for its limit pauses the vendor
        and asks again (it was not performed), up to ``max_rate_limited`` times. ``lease``: an
        effect's, made only while it holds (checked after the pace's wait)."""
        refusals = 0
        while True:
            with self.throttle.turn(refused_before=refusals > 0):
                if not lease.holds():
                    raise _LeaseEnded()
                try:
                    return ask(call)
                except RateLimited as exc:
                    refusals += 1
                    self.throttle.refused(exc.retry_after_s)
                    if refusals >= self.retry.max_rate_limited:
                        raise

    def _in_doubt(self, look: Look, attempts: int) -> Result:
        # the effect may well have happened (an earlier attempt's answer was lost): "not repeated",
        # never "not performed"
        return Result(Status.IN_DOUBT, error=f"not repeated, and it may have happened: {look.unanswered}",
                      attempts=attempts)

    def _perform(self, call: ActionCall, attempts_before: int, lease: Lease) -> Result | Lapsed:
        unknown: str | None = None
        last_error = ""
        attempt = 0
        for attempt in range(1, self.retry.max_attempts + 1):
            try:
                response = self._paced(self.connector.perform, call, lease)
                return Result(Status.SUCCEEDED, response.vendor_ref, attempts=attempts_before + attempt)
            except _LeaseEnded:
                return Lapsed(attempted=attempts_before + attempt > 1)
            except PermanentVendorError as exc:
                return Result(Status.FAILED, error=str(exc), attempts=attempts_before + attempt)
            except OutcomeUnknown as exc:
                unknown = last_error = str(exc)
                if self.connector.capability is Capability.NONE:
                    return Result(Status.IN_DOUBT, error=str(exc), attempts=attempts_before + attempt)
                if self.connector.capability is Capability.STATE_CHECK:
                    look = self.look(call, attempted_at=self.clock())
                    if look.unanswered is not None:
                        return self._in_doubt(look, attempts_before + attempt)
                    if look.response is not None:
                        return Result(Status.SUCCEEDED, look.response.vendor_ref,
                                       attempts=attempts_before + attempt)
            except TransientVendorError as exc:
                last_error = str(exc)
            if attempt < self.retry.max_attempts:
                self.sleep(self.retry.backoff_s(attempt))
        status = Status.IN_DOUBT if unknown else Status.FAILED
        return Result(status, error=f"gave up after {attempt} attempts: {last_error}",
                       attempts=attempts_before + attempt)
