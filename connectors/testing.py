"""The replay test, for any connector (yours too), as a function and a pytest fixture.

1. call with key K through the executor's protocol (``ActionRunner``); record the response
   and the side effects;
2. replay it as the executor does after a crash, an aborted result commit or an ambiguous
   answer (an intent without a result): the runner reconciles by the connector's
   capability, and *really calls the vendor again* where that capability says it may:
   ``VENDOR_KEY`` performs again with K, ``STATE_CHECK`` asks the vendor, ``NONE`` calls
   nothing and is ``in_doubt``;
3. the fifth assertion: the vendor's ledger shows no second side effect, and the replay
   answers what the first call did (``in_doubt`` for a connector that can do neither).

A connector that claims a vendor key its vendor does not honour fails step 3: the second
call reaches the vendor and makes a second effect.

Use it from pytest: install ``runonce[testing]`` and take the ``replay`` fixture (a pytest11
plugin, loaded by pytest itself); or import it, ``from runonce.connectors.testing import
replay``, in a conftest.py.
"""

from __future__ import annotations

from typing import Callable

import pytest

from runonce.connectors.base import ActionCall, Capability, Connector, VendorResponse
from runonce.connectors.runner import ActionRunner, RetryPolicy
from runonce.wire.results import Result, Status


class _Counted:
    """The connector, counting the calls that reach it."""

    def __init__(self, connector: Connector) -> None:
        self.inner = connector
        self.name, self.tools, self.capability = connector.name, connector.tools, connector.capability
        self.check_lag_s = float(getattr(connector, "check_lag_s", 0.0))
        self.performs = self.checks = 0

    def perform(self, call: ActionCall) -> VendorResponse:
        self.performs += 1
        return self.inner.perform(call)

    def check(self, call: ActionCall) -> VendorResponse | None:
        self.checks += 1
        return self.inner.check(call)


def replay_test(connector: Connector, call: ActionCall, side_effects: Callable[[], int]) -> Result:
    """Run the replay test; raises AssertionError naming the broken assertion. Returns the outcome."""
    counted = _Counted(connector)
    runner = ActionRunner(counted, RetryPolicy(max_attempts=3, base_backoff_s=0.05))
    before = side_effects()
    first = runner.run(call, None, lambda: None)
    after_first = side_effects()
    assert first is not None and first.status is Status.SUCCEEDED, f"{connector.name}: first call did not succeed: {first}"
    assert after_first - before == 1, f"{connector.name}: first call made {after_first - before} side effects, not 1"
    calls_before = (counted.performs, counted.checks)
    second = runner.run(call, Result(Status.ATTEMPTING, attempts=first.attempts), lambda: None)
    assert second is not None
    if connector.capability is Capability.VENDOR_KEY:
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
    return first


@pytest.fixture
def replay() -> Callable[[Connector, ActionCall, Callable[[], int]], Result]:
    return replay_test
