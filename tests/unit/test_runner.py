"""The executor's per-action protocol with a scripted connector (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from runonce.connectors.base import ActionCall, Capability, VendorResponse
from runonce.connectors.errors import OutcomeUnknown, PermanentVendorError, TransientVendorError
from runonce.connectors.runner import ActionRunner, Outcome, RetryPolicy, Status

CALL = ActionCall("a1", "t", {}, "K")


@dataclass
class Scripted:
    """Raises the scripted errors in turn, then succeeds; counts effects that 'happened'."""

    capability: Capability
    script: list[Exception | None] = field(default_factory=list)
    effects: int = 0
    found: bool = False
    calls: int = 0
    name = "scripted"
    tools = frozenset({"t"})

    def perform(self, call: ActionCall) -> VendorResponse:
        self.calls += 1
        step = self.script.pop(0) if self.script else None
        if isinstance(step, OutcomeUnknown):
            self.effects += 1  # it happened; we just never heard
            self.found = True
        if step is not None:
            raise step
        self.effects += 1
        self.found = True
        return VendorResponse("ref-1")

    def check(self, call: ActionCall) -> VendorResponse | None:
        return VendorResponse("ref-found") if self.found else None


def runner(c: Scripted) -> ActionRunner:
    return ActionRunner(c, RetryPolicy(max_attempts=4, base_backoff_s=0.0), sleep=lambda _s: None)


def test_intent_is_written_before_the_call() -> None:
    events: list[str] = []
    c = Scripted(Capability.VENDOR_KEY)
    original = c.perform
    c.perform = lambda call: (events.append("call"), original(call))[1]  # type: ignore[method-assign]
    out = runner(c).run(CALL, None, lambda: events.append("intent"))
    assert events == ["intent", "call"] and out == Outcome(Status.SUCCEEDED, "ref-1", attempts=1)


def test_transient_errors_are_retried_with_the_same_key_then_succeed() -> None:
    c = Scripted(Capability.VENDOR_KEY, [TransientVendorError("500"), TransientVendorError("409 in flight")])
    out = runner(c).run(CALL, None, lambda: None)
    assert out == Outcome(Status.SUCCEEDED, "ref-1", attempts=3)


def test_permanent_errors_fail_at_once() -> None:
    c = Scripted(Capability.VENDOR_KEY, [PermanentVendorError("400 bad card")])
    out = runner(c).run(CALL, None, lambda: None)
    assert out is not None and out.status is Status.FAILED and c.calls == 1 and "bad card" in (out.error or "")


def test_attempts_are_bounded() -> None:
    c = Scripted(Capability.VENDOR_KEY, [TransientVendorError("500")] * 10)
    out = runner(c).run(CALL, None, lambda: None)
    assert out is not None and (out.status, out.attempts, c.calls) == (Status.FAILED, 4, 4)


@pytest.mark.parametrize("capability, status, effects", [
    (Capability.NONE, Status.IN_DOUBT, 1),         # never re-run blindly
    (Capability.VENDOR_KEY, Status.SUCCEEDED, 2),  # the scripted vendor here does not dedupe; a real one replays
    (Capability.STATE_CHECK, Status.SUCCEEDED, 1), # the check finds the effect: no second call
])
def test_a_timeout_is_outcome_unknown_never_failed(capability: Capability, status: Status, effects: int) -> None:
    c = Scripted(capability, [OutcomeUnknown("no answer in 30 s")])
    out = runner(c).run(CALL, None, lambda: None)
    assert out is not None and out.status is status and c.effects == effects


@pytest.mark.parametrize("capability, status, calls", [
    (Capability.NONE, Status.IN_DOUBT, 0),
    (Capability.VENDOR_KEY, Status.SUCCEEDED, 1),
    (Capability.STATE_CHECK, Status.SUCCEEDED, 0),
])
def test_redelivery_with_intent_and_no_result_is_reconciled(capability: Capability, status: Status,
                                                           calls: int) -> None:
    c = Scripted(capability, found=True)
    intents: list[int] = []
    out = runner(c).run(CALL, Outcome(Status.ATTEMPTING), lambda: intents.append(1))
    assert out is not None and out.status is status and c.calls == calls and not intents


def test_a_final_result_means_nothing_to_do() -> None:
    c = Scripted(Capability.VENDOR_KEY)
    assert runner(c).run(CALL, Outcome(Status.SUCCEEDED, "r"), lambda: None) is None and c.calls == 0
