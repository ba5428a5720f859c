"""The replay test, for any connector (yours too), as a function and a pytest fixture. It
drives the executor's own path: the plan (connectors/executor/batch.py ``plan_call``), then perform or
reconcile (``ActionRunner.carry_out``), with what the executor would know after each commit.

1. a new action with vendor key K: planned PERFORM, its intent committed, performed once;
   the vendor's ledger shows exactly one side effect;
2. the redelivery after a crash, an aborted result commit or an ambiguous answer (an intent
   without a result): planned RECONCILE, reconciled by the connector's capability, *really
   calling the vendor again* where the capability says it may (``VENDOR_KEY`` and
   ``NATURAL_KEY`` perform again, ``STATE_CHECK`` asks, ``NONE`` calls nothing and is ``in_doubt``);
3. the fifth assertion: no second side effect, and the replay answers what the first call did;
4. the redelivery once the result is committed, and another action reusing K: nothing is
   called (planned DONE and BLOCKED);
5. ``NATURAL_KEY`` connectors, given a call with a natural id: another action with a key of
   its own and the same natural id reaches the vendor, makes no second effect, and is answered
   with the first's vendor reference.

A connector that claims a vendor key its vendor does not honour fails step 3: the second
call reaches the vendor and makes a second effect.

Use it from pytest: install ``runonce[testing]`` and take the ``replay`` fixture (a pytest11
plugin, loaded by pytest itself); or import it, ``from runonce.connectors.testing import
replay``, in a conftest.py. The ``sandbox_vendors`` fixture is runonce's sandbox vendors
(``connectors/sandbox``), started for one test: among them an email API that deduplicates on
``Idempotency-Key`` as Resend's does, and a ledger that counts every side effect.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import pytest

from runonce.connectors.executor.batch import Memory, Plan, plan_call
from runonce.connectors.executor.runner import ActionRunner, Lapsed, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall, Capability, Connector, VendorResponse, state_check
from runonce.wire.results import Result, Status

if TYPE_CHECKING:
    from runonce.connectors.vendors.sandbox.local import LocalVendors


class _Counted:
    """The connector, counting the calls that reach it (a state check's too, when it has one)."""

    def __init__(self, connector: Connector) -> None:
        self.inner = connector
        self.state = state_check(connector)
        self.name, self.tools, self.capability = connector.name, connector.tools, connector.capability
        self.check_lag_s = self.state.check_lag_s if self.state is not None else 0.0
        self.timeout_s = self.state.timeout_s if self.state is not None else 0.0
        self.performs = self.checks = 0

    def perform(self, call: ActionCall) -> VendorResponse:
        self.performs += 1
        return self.inner.perform(call)

    def check(self, call: ActionCall) -> VendorResponse | None:
        assert self.state is not None, f"{self.name}: only a STATE_CHECK connector is asked"
        self.checks += 1
        return self.state.check(call)


@dataclasses.dataclass
class _Committed:
    """What the executor's results index would answer, as plain dicts (batch.ResultLookups)."""

    by_action: dict[str, Result] = dataclasses.field(default_factory=dict)
    by_key: dict[str, str] = dataclasses.field(default_factory=dict)

    def result(self, action_id: str) -> Result | None:
        return self.by_action.get(action_id)

    def first_user(self, vendor_key: str) -> str | None:
        return self.by_key.get(vendor_key)


def replay_test(connector: Connector, call: ActionCall, side_effects: Callable[[], int]) -> Result:
    """Run the replay test; raises AssertionError naming the broken assertion. Returns the outcome."""
    counted = _Counted(connector)
    runner = ActionRunner(counted, RetryPolicy(max_attempts=3, base_backoff_s=0.05))
    committed = _Committed()
    by_action, by_key = committed.by_action, committed.by_key
    known = Memory(committed, {})

    def step(expected: Plan) -> Result | None:
        plan, prior = plan_call(call, known)
        assert plan is expected, f"{connector.name}: the executor planned {plan.value}, expected {expected.value}"
        if plan not in (Plan.PERFORM, Plan.RECONCILE):
            return prior
        return _finished(runner.carry_out(plan, call, prior))

    before = side_effects()
    first = step(Plan.PERFORM)  # its intent committed first, as step 1 of a batch does
    by_key[call.vendor_key] = call.action_id
    after_first = side_effects()
    assert first is not None and first.status is Status.SUCCEEDED, f"{connector.name}: first call did not succeed: {first}"
    assert after_first - before == 1, f"{connector.name}: first call made {after_first - before} side effects, not 1"

    by_action[call.action_id] = Result(Status.ATTEMPTING, attempts=first.attempts)  # its result never committed
    calls_before = (counted.performs, counted.checks)
    second = step(Plan.RECONCILE)
    assert second is not None
    if connector.capability in (Capability.VENDOR_KEY, Capability.NATURAL_KEY):
        assert counted.performs > calls_before[0], f"{connector.name}: the replay never reached the vendor"
    if connector.capability is Capability.STATE_CHECK:
        assert counted.checks > calls_before[1], f"{connector.name}: the replay never asked the vendor"
    assert side_effects() == after_first, (f"{connector.name}: the replay with the same key made "
                                           f"{side_effects() - after_first} more side effect(s)")
    if connector.capability is Capability.NONE:
        assert (counted.performs, second.status) == (calls_before[0], Status.IN_DOUBT), (
            f"{connector.name} cannot deduplicate: its replay must call nothing and be in_doubt, got {second}")
    else:
        assert (second.status, second.vendor_ref) == (first.status, first.vendor_ref), (
            f"{connector.name}: the replay answered {second}, the first call {first}")

    by_action[call.action_id] = second  # committed: a redelivery, and another action with K, call no one
    calls_before = (counted.performs, counted.checks)
    step(Plan.DONE)
    other = dataclasses.replace(call, action_id=f"{call.action_id}-other")
    plan, _ = plan_call(other, known)
    assert plan is Plan.BLOCKED, f"{connector.name}: another action with the same vendor key was planned {plan.value}"
    assert (counted.performs, counted.checks) == calls_before and side_effects() == after_first, (
        f"{connector.name}: a redelivery of a committed result reached the vendor")
    if connector.capability is Capability.NATURAL_KEY and call.natural_id is not None:
        _twin_makes_no_second_effect(runner, counted, call, first, side_effects)
    return first


def _twin_makes_no_second_effect(runner: ActionRunner, counted: _Counted, call: ActionCall, first: Result,
                                 side_effects: Callable[[], int]) -> None:
    """5. another action, its own key, the same natural id: planned PERFORM (the executor
    cannot know), it reaches the vendor, which refuses the copy; its result names the first's."""
    twin = dataclasses.replace(call, action_id=f"{call.action_id}-twin", vendor_key=f"{call.vendor_key}-twin")
    plan, _ = plan_call(twin, Memory(_Committed(by_key={call.vendor_key: call.action_id}), {}))
    assert plan is Plan.PERFORM, f"{counted.name}: a twin with its own key was planned {plan.value}"
    before, performs = side_effects(), counted.performs
    out = _finished(runner.carry_out(plan, twin, None))
    assert counted.performs > performs, f"{counted.name}: the twin never reached the vendor"
    assert side_effects() == before, (f"{counted.name}: a second action with the same natural id made "
                                      f"{side_effects() - before} more side effect(s)")
    assert (out.status, out.vendor_ref) == (first.status, first.vendor_ref), (
        f"{counted.name}: the twin answered {out}, not the first action's {first}")


@pytest.fixture
def replay() -> Callable[[Connector, ActionCall, Callable[[], int]], Result]:
    return replay_test


@pytest.fixture
def sandbox_vendors(tmp_path: Path) -> Iterator[LocalVendors]:
    """runonce's sandbox vendors in ``tmp_path``, stopped after the test: ``http_url``, each
    vendor's key file (``email_api_key_file``, ``stripe_key_file``, ...) and ``ledger``."""
    from runonce.connectors.vendors.sandbox.local import LocalVendors

    sandbox = LocalVendors(tmp_path / "sandbox-vendors").start()
    try:
        yield sandbox
    finally:
        sandbox.stop()


def _finished(outcome: Result | Lapsed) -> Result:
    """The runner here has no lease (it runs without Kafka): every call starts."""
    assert isinstance(outcome, Result), f"a runner without a lease lapsed: {outcome}"
    return outcome
