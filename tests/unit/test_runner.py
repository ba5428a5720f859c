"""The executor's per-action protocol with a scripted connector (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from runonce.connectors.executor.lease import Lease
from runonce.connectors.executor.runner import ActionRunner, Lapsed, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.errors import OutcomeUnknown, PermanentVendorError, TransientVendorError
from runonce.wire.results import Result, Status
from tests.support.clock import Clock
from tests.support.executor_fakes import CheckedVendor, KeyedVendor

CALL = ActionCall("a1", "t", {}, "K")


@dataclass
class Scripted:
    """Raises the scripted errors in turn, then succeeds; counts effects that 'happened'."""

    capability: Capability
    script: list[Exception | None] = field(default_factory=list)
    effects: int = 0
    found: bool = False
    calls: int = 0
    #: errors the state check raises in turn before it answers
    check_errors: list[Exception] = field(default_factory=list)
    checks: int = 0
    check_lag_s = 0.0
    timeout_s = 1.0
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
        self.checks += 1
        if self.check_errors:
            raise self.check_errors.pop(0)
        return VendorResponse("ref-found") if self.found else None


def runner(c: Scripted) -> ActionRunner:
    return ActionRunner(c, RetryPolicy(max_attempts=4, base_backoff_s=0.0), sleep=lambda _s: None)


def test_transient_errors_are_retried_with_the_same_key_then_succeed() -> None:
    c = Scripted(Capability.VENDOR_KEY, [TransientVendorError("500"), TransientVendorError("409 in flight")])
    out = runner(c).perform(CALL)
    assert out == Result(Status.SUCCEEDED, "ref-1", attempts=3)


def test_permanent_errors_fail_at_once() -> None:
    c = Scripted(Capability.VENDOR_KEY, [PermanentVendorError("400 bad card")])
    out = runner(c).perform(CALL)
    assert out is not None and out.status is Status.FAILED and c.calls == 1 and "bad card" in (out.error or "")


def test_attempts_are_bounded() -> None:
    c = Scripted(Capability.VENDOR_KEY, [TransientVendorError("500")] * 10)
    out = runner(c).perform(CALL)
    assert out is not None and (out.status, out.attempts, c.calls) == (Status.FAILED, 4, 4)


def test_giving_up_after_an_unknown_outcome_is_in_doubt_never_failed() -> None:
    """The first attempt's answer was lost (it may have charged), the retries with the same key
    were refused until the attempts ran out: the action is in doubt, not failed (an agent that
    reads "failed" charges again). Catches the give-up status taken from the last error alone."""
    c = Scripted(Capability.VENDOR_KEY, [OutcomeUnknown("read timeout")] + [TransientVendorError("503")] * 10)
    out = runner(c).perform(CALL)
    assert isinstance(out, Result) and (out.status, out.attempts, c.calls) == (Status.IN_DOUBT, 4, 4), out
    assert out.error is not None and out.error.startswith("gave up after 4 attempts")


@pytest.mark.parametrize("capability, status, effects", [
    (Capability.NONE, Status.IN_DOUBT, 1),         # never re-run blindly
    (Capability.VENDOR_KEY, Status.SUCCEEDED, 2),  # the scripted vendor here does not dedupe; a real one replays
    (Capability.NATURAL_KEY, Status.SUCCEEDED, 2), # so too: a real one refuses the copy
    (Capability.STATE_CHECK, Status.SUCCEEDED, 1), # the check finds the effect: no second call
])
def test_a_timeout_is_outcome_unknown_never_failed(capability: Capability, status: Status, effects: int) -> None:
    c = Scripted(capability, [OutcomeUnknown("no answer in 30 s")])
    out = runner(c).perform(CALL)
    assert out is not None and out.status is status and c.effects == effects


@pytest.mark.parametrize("capability, status, calls", [
    (Capability.NONE, Status.IN_DOUBT, 0),
    (Capability.VENDOR_KEY, Status.SUCCEEDED, 1),
    (Capability.NATURAL_KEY, Status.SUCCEEDED, 1),
    (Capability.STATE_CHECK, Status.SUCCEEDED, 0),
])
def test_redelivery_with_intent_and_no_result_is_reconciled(capability: Capability, status: Status,
                                                           calls: int) -> None:
    c = Scripted(capability, found=True)
    out = runner(c).reconcile(CALL, 0)
    assert out.status is status and c.calls == calls


UNANSWERED = [TransientVendorError("search answered 500"), OutcomeUnknown("search: no answer in 30 s"),
              TimeoutError("timed out")]


@pytest.mark.parametrize("error", UNANSWERED, ids=lambda e: type(e).__name__)
def test_an_unanswered_check_on_redelivery_is_in_doubt_never_a_second_perform(error: Exception) -> None:
    c = Scripted(Capability.STATE_CHECK, found=True, check_errors=[error] * 10)
    out = runner(c).reconcile(CALL, 1)
    assert out is not None and out.status is Status.IN_DOUBT
    assert c.calls == 0 and c.checks == 4  # asked again, bounded, then left to a human
    assert str(error) in (out.error or "") and type(error).__name__ in (out.error or "")


@pytest.mark.parametrize("error", UNANSWERED, ids=lambda e: type(e).__name__)
def test_an_unanswered_check_after_an_unknown_perform_is_in_doubt(error: Exception) -> None:
    c = Scripted(Capability.STATE_CHECK, [OutcomeUnknown("no answer in 30 s")], check_errors=[error] * 10)
    out = runner(c).perform(CALL)
    assert out is not None and out.status is Status.IN_DOUBT and str(error) in (out.error or "")
    assert c.calls == 1 and c.effects == 1  # the one effect that happened, never a second


def test_a_check_that_recovers_within_its_retries_answers() -> None:
    c = Scripted(Capability.STATE_CHECK, found=True, check_errors=[TransientVendorError("500")] * 3)
    out = runner(c).reconcile(CALL, 0)
    assert out == Result(Status.SUCCEEDED, "ref-found") and c.calls == 0 and c.checks == 4


def test_a_refused_check_is_not_asked_again() -> None:
    c = Scripted(Capability.STATE_CHECK, found=True, check_errors=[PermanentVendorError("403")])
    out = runner(c).reconcile(CALL, 0)
    assert out is not None and out.status is Status.IN_DOUBT and c.checks == 1 and c.calls == 0


@pytest.mark.parametrize("path", ["perform", "reconcile"])
def test_an_in_doubt_action_says_not_repeated_never_not_performed(path: str) -> None:
    """Catches the in_doubt error back to "not performed: state check refused": after a 5xx the
    effect may well exist, and an operator reading "not performed" would run it by hand."""
    c = Scripted(Capability.STATE_CHECK, [OutcomeUnknown("HTTP 502 after sending")],
                 check_errors=[PermanentVendorError("403 on search")])
    out = runner(c).perform(CALL) if path == "perform" else runner(c).reconcile(CALL, 1)
    assert out.status is Status.IN_DOUBT and "not repeated" in (out.error or ""), out
    assert "not performed" not in (out.error or ""), out


@dataclass
class LaggingSearch(Scripted):
    """A state check backed by a search index that shows an effect only ``check_lag_s`` after it."""

    clock: Clock = field(default_factory=lambda: Clock(1000.0))
    check_lag_s: float = 5.0
    timeout_s: float = 1.0
    effect_at: float | None = None

    def perform(self, call: ActionCall) -> VendorResponse:
        self.effect_at = self.clock.now
        return super().perform(call)

    def check(self, call: ActionCall) -> VendorResponse | None:
        self.checks += 1
        if self.effect_at is not None and self.clock.now >= self.effect_at + self.check_lag_s:
            return VendorResponse("ref-found")
        return None


def lagging_runner(c: LaggingSearch) -> ActionRunner:
    return ActionRunner(c, RetryPolicy(max_attempts=4, base_backoff_s=0.5), sleep=c.clock.sleep, clock=c.clock)


def test_a_lagging_search_is_waited_out_before_absent_is_believed_after_an_unknown_perform() -> None:
    c = LaggingSearch(Capability.STATE_CHECK, [OutcomeUnknown("dropped response")])
    out = lagging_runner(c).perform(CALL)
    assert out == Result(Status.SUCCEEDED, "ref-found", attempts=1)
    assert c.effects == 1 and c.checks > 1  # the first searches saw nothing, and were not believed


def test_a_lagging_search_is_waited_out_on_redelivery() -> None:
    c = LaggingSearch(Capability.STATE_CHECK)
    c.effect_at, c.found = c.clock.now - 1.0, True  # the crashed process created it a second ago
    out = lagging_runner(c).reconcile(CALL, 1)
    assert out == Result(Status.SUCCEEDED, "ref-found", attempts=1) and c.calls == 0


def test_absent_after_the_lag_bound_is_performed_once() -> None:
    c = LaggingSearch(Capability.STATE_CHECK)
    started = c.clock.now
    out = lagging_runner(c).reconcile(CALL, 1)
    assert out == Result(Status.SUCCEEDED, "ref-1", attempts=2) and c.calls == 1
    assert c.effect_at is not None and c.effect_at >= started + c.check_lag_s


def test_a_reconcile_waits_out_what_a_zombie_could_still_start_before_believing_absent() -> None:
    """The intent's first owner may have lost its partitions and still be alive (a zombie): it
    may start a call until its lease ends and that call lands within the request's timeout.
    So "absent" counts only from a search made a lease, a timeout and the search's lag after
    the reconcile began: a zombie that creates the ticket 5.5 s in (lease 4 s, timeout 2 s) is
    found, not doubled. Catches the window left out (absent believed after the lag alone, 5 s)."""
    c = LaggingSearch(Capability.STATE_CHECK, check_lag_s=1.0, timeout_s=2.0)
    started = c.clock.now
    lease = Lease(4.0, clock=c.clock)
    lease.proven(started)  # this owner's own lease: its calls may start

    def zombie_sleep(s: float) -> None:
        before = c.clock.now
        c.clock.sleep(s)
        if before < started + 5.5 <= c.clock.now and c.effect_at is None:
            c.effect_at = started + 5.5  # the zombie's call lands
            c.found = True

    runner = ActionRunner(c, RetryPolicy(max_attempts=4, base_backoff_s=0.5, lag_poll_s=0.5), sleep=zombie_sleep,
                          clock=c.clock)
    out = runner.reconcile(CALL, 1, lease)
    assert out == Result(Status.SUCCEEDED, "ref-found", attempts=1) and c.calls == 0, out
    assert runner.zombie_window_s(lease) == 6.0


def test_a_call_starts_only_while_the_lease_holds() -> None:
    """Catches the lease not asked before an attempt (the vendor called after it ended), and a
    retry after it ended taken for a call never made (``attempted``: the redelivery must reconcile)."""
    c = Scripted(Capability.VENDOR_KEY, [TransientVendorError("503")])
    now = [0.0]
    lease = Lease(5.0, clock=lambda: now[0])
    runner = ActionRunner(c, RetryPolicy(base_backoff_s=1.0), sleep=lambda s: now.__setitem__(0, now[0] + s * 10))
    assert runner.perform(CALL, lease) == Lapsed(attempted=False) and c.calls == 0  # never proven
    lease.proven(now[0])
    assert runner.perform(CALL, lease) == Lapsed(attempted=True) and c.calls == 1  # the retry fell after its end


@pytest.mark.parametrize("vendor, effects", [(CheckedVendor(), 2), (KeyedVendor(), 1)], ids=["state_check", "vendor_key"])
def test_the_leases_limit_a_pause_after_the_check_longer_than_the_zombie_window(
        vendor: KeyedVendor, effects: int) -> None:
    """What the lease cannot close (docs/operating.md, "The lease's limit"): a zombie whose lease
    check passed, then paused before its request left (a GC pause, a frozen VM) for longer than
    its heir's zombie window. Meanwhile the heir reconciles the intent: its state check finds
    nothing after the window and performs; then the zombie's request lands. A state-check vendor
    makes two effects; a vendor-key one answers the late copy as the first: one. Catches a change
    that claims more than this (or a vendor key the sandbox no longer honours)."""
    now = [0.0]

    def advance(s: float) -> None:
        now[0] += s

    zombie_lease, heir_lease = Lease(4.0, clock=lambda: now[0]), Lease(4.0, clock=lambda: now[0])
    zombie_lease.proven(0.0)
    def heir_sleep(s: float) -> None:  # its executor renews its lease meanwhile (a proving commit)
        advance(s)
        heir_lease.proven(now[0])

    heir = ActionRunner(vendor, RetryPolicy(base_backoff_s=0.1, lag_poll_s=0.5), sleep=heir_sleep,
                        clock=lambda: now[0])

    @dataclass
    class PausedAfterTheCheck:
        """The zombie's connector: its request leaves only after the pause and the heir's reconcile."""

        name, tools, capability = vendor.name, vendor.tools, vendor.capability
        check_lag_s, timeout_s = 0.0, 1.0

        def check(self, call: ActionCall) -> VendorResponse | None:
            assert isinstance(vendor, CheckedVendor)
            return vendor.check(call)

        def perform(self, call: ActionCall) -> VendorResponse:
            advance(heir.zombie_window_s(heir_lease) + 10.0)  # paused past the window, the lease check behind it
            heir_lease.proven(now[0])  # the heir owns the partition now
            healed = heir.reconcile(call, 1, heir_lease)
            assert (healed.status, healed.vendor_ref) == (Status.SUCCEEDED, heir_result_ref(vendor)), healed
            return vendor.perform(call)

    zombie = ActionRunner(PausedAfterTheCheck(), RetryPolicy(), sleep=advance, clock=lambda: now[0])
    zombie.perform(CALL, zombie_lease)
    assert len(vendor.effects) == effects, vendor.effects


def heir_result_ref(vendor: KeyedVendor) -> str:
    """The reference the heir's reconcile answers with: the first (and, for it, only) effect."""
    return "SUP-1" if isinstance(vendor, CheckedVendor) else "ch-0"
