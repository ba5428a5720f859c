"""The replay test, for any connector (yours too), as a function and a pytest fixture.

1. call with key K; record the response and the side effects;
2. call again with K;
3. the responses are equal, and - the fifth assertion - the vendor's ledger shows no
   second side effect.

The call goes through the same idempotent protocol the executor runs (``ActionRunner`` with
the result store the executor restores from ``actions.results``), here held in memory.

Use it from pytest: install ``runonce[testing]`` and take the ``replay`` fixture (a pytest11
plugin, loaded by pytest itself); or import it, ``from runonce.connectors.testing import
replay``, in a conftest.py.
"""

from __future__ import annotations

from typing import Callable

import pytest

from runonce.connectors.base import ActionCall, Connector
from runonce.connectors.runner import ActionRunner, RetryPolicy
from runonce.wire.results import Result, Status


class MemoryResultStore:
    def __init__(self) -> None:
        self.outcomes: dict[str, Result] = {}

    def call(self, runner: ActionRunner, call: ActionCall) -> Result:
        prior = self.outcomes.get(call.vendor_key)
        outcome = runner.run(call, prior, lambda: self.outcomes.__setitem__(call.vendor_key,
                                                                            Result(Status.ATTEMPTING)))
        if outcome is None:
            assert prior is not None
            return prior
        self.outcomes[call.vendor_key] = outcome
        return outcome


def replay_test(connector: Connector, call: ActionCall, side_effects: Callable[[], int]) -> Result:
    """Run the replay test; raises AssertionError naming the broken assertion. Returns the outcome."""
    store = MemoryResultStore()
    runner = ActionRunner(connector, RetryPolicy(max_attempts=3, base_backoff_s=0.05))
    before = side_effects()
    first = store.call(runner, call)
    after_first = side_effects()
    assert first.status is Status.SUCCEEDED, f"{connector.name}: first call did not succeed: {first}"
    assert after_first - before == 1, f"{connector.name}: first call made {after_first - before} side effects, not 1"
    second = store.call(runner, call)
    assert second == first, f"{connector.name}: the retry answered {second}, the first call {first}"
    assert side_effects() == after_first, (f"{connector.name}: the retry with the same key made "
                                           f"{side_effects() - after_first} more side effect(s)")
    return first


@pytest.fixture
def replay() -> Callable[[Connector, ActionCall, Callable[[], int]], Result]:
    return replay_test
