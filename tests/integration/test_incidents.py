"""The seed's incidents end to end: agent SDK -> stream job -> executor -> sandbox vendor,
counted from the sandbox ledgers, with and without runonce."""

from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from typing import Any, Iterator

import pytest

from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.connectors.vendors.sandbox.smtp_server import SmtpServer
from runonce.sdk.client import ActionClient, ActionOutcome
from runonce.settings import Settings
from tests.support.worker import RunonceProcess, WorkerProcess, start_group_at_end

# The default runtime only: faust runs the same Pipeline, and its end-to-end path is held by
# the stream-job, poison, crash and commit-gap modules; these incidents are the SDK's and the
# executors' story, and a second pass through them proved nothing new for a minute of suite.
pytestmark = [pytest.mark.broker, pytest.mark.slow,
              pytest.mark.parametrize("stream_worker", ["transactional"], indirect=True, scope="module")]


@pytest.fixture(scope="module")
def stack(broker: Settings, stream_worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[VendorServer, SmtpServer]]:
    local = LocalVendors(tmp_path_factory.mktemp("sandbox")).start()
    vendors, smtp = local.vendors, local.smtp
    env = local.env()
    logs = tmp_path_factory.mktemp("executor-logs")
    executors = []
    run = uuid.uuid4().hex[:6]
    for vendor in ("smtp", "payments"):
        group = f"runonce-exec-{vendor}-{run}"  # a group of this module's own: none of its offsets or members
        start_group_at_end(broker.bootstrap_servers(), group)
        p = RunonceProcess(broker, f"exec-{vendor}", ["executor", "--vendor", vendor, "--group", group, "--slot", run],
                           logs, env)
        p.start()
        executors.append(p)
    yield vendors, smtp
    for p in executors:
        p.stop()
    local.stop()


def _submit_many(bootstrap: str, key: str, n: int, barrier: Any, out: Any) -> None:
    with ActionClient(bootstrap, agent_id="booking-agent") as client:
        barrier.wait(60)
        handles = [client.submit("charge_payment", {"card": "tok_visa", "amount_cents": 41900}, idempotency_key=key)
                   for _ in range(n)]
        out.put([(h.result(90).status, h.result(90).vendor_ref) for h in handles])


def test_100_concurrent_submits_of_one_key_charge_once(broker: Settings, stack: tuple[VendorServer, SmtpServer]) -> None:
    vendors, _ = stack
    key = f"booking-{uuid.uuid4().hex[:8]}"
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_submit_many, args=(broker.bootstrap_servers(), key, 25, barrier, out))
             for _ in range(4)]
    for p in procs:
        p.start()
    results = [r for _ in procs for r in out.get(timeout=180)]
    for p in procs:
        p.join(30)
    assert len(results) == 100
    assert len(set(results)) == 1 and results[0][0] == "succeeded"
    assert vendors.ledger.count("payments", key) == 1
    assert len(vendors.ledger.requests("/v1/charges", key)) == 1  # no second call the vendor's dedup hid


def test_sdk_await_and_tool_decorator(broker: Settings, stack: tuple[VendorServer, SmtpServer]) -> None:
    import asyncio

    vendors, _ = stack
    key = f"deco-{uuid.uuid4().hex[:8]}"
    with ActionClient(broker.bootstrap_servers(), agent_id="tool-agent") as client:

        @client.tool("charge_payment")
        def charge_payment(card: str, amount_cents: int, idempotency_key: str) -> None:
            """Charge a card once."""

        first = charge_payment(card="tok", amount_cents=1234, idempotency_key=key)
        retried = charge_payment(card="tok", amount_cents=1234, idempotency_key=key)  # a framework retry

        async def agent() -> ActionOutcome:
            return await client.submit("charge_payment", {"card": "tok", "amount_cents": 1234}, idempotency_key=key)

        awaited = asyncio.run(agent())
    assert first.status == "succeeded" and first.vendor_ref
    assert (retried.vendor_ref, awaited.vendor_ref) == (first.vendor_ref, first.vendor_ref)
    assert retried.result_of == first.action_id and retried.action_id != first.action_id
    assert vendors.ledger.count("payments", key) == 1
    assert len(vendors.ledger.requests("/v1/charges", key)) == 1  # no second call the vendor's dedup hid
    assert charge_payment.__doc__ == "Charge a card once."


def test_a_denied_tool_resolves_to_its_drop_and_unknown_tools_warn(broker: Settings,
                                                                  stack: tuple[VendorServer, SmtpServer]) -> None:
    with ActionClient(broker.bootstrap_servers()) as client:
        denied = client.submit("execute_database_write", {"sql": "DROP TABLE users"}).result(60)
        with pytest.warns(UserWarning, match="no runonce policy names tool 'book_flight'"):
            client.submit("book_flight", {"from": "SFO", "to": "JFK"}, idempotency_key=uuid.uuid4().hex)
    assert (denied.status, denied.drop_reason) == ("dropped", "tool_denied")


def test_a_retry_from_a_fresh_client_resolves_to_an_original_it_never_saw(
        broker: Settings, stack: tuple[VendorServer, SmtpServer]) -> None:
    """The agent restarted between the call and its retry: the new client's tail starts after
    the original's result, so it must look the original up where it was written."""
    vendors, _ = stack
    key = f"restart-{uuid.uuid4().hex[:8]}"
    charge = {"card": "tok_visa", "amount_cents": 7700}
    with ActionClient(broker.bootstrap_servers(), agent_id="booking-agent") as first_life:
        original = first_life.submit("charge_payment", charge, idempotency_key=key).result(60)
    time.sleep(1)
    with ActionClient(broker.bootstrap_servers(), agent_id="booking-agent") as second_life:
        assert not second_life.cached(original.action_id)  # older than any cache
        retried = second_life.submit("charge_payment", charge, idempotency_key=key).result(60)
        assert second_life.waiting == 0  # nothing kept once resolved
    assert original.status == "succeeded" and retried.repeated
    assert (retried.status, retried.vendor_ref, retried.result_of) == ("succeeded", original.vendor_ref,
                                                                       original.action_id)
    assert retried.repeat_reason == "duplicate_key"
    assert vendors.ledger.count("payments", key) == 1
    assert len(vendors.ledger.requests("/v1/charges", key)) == 1  # no second call the vendor's dedup hid
