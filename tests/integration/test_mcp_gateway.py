"""`runonce mcp` driven by the mcp package's own client, over stdio and streamable HTTP,
against the real broker, a stream worker, executors and the sandbox vendors."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
import uuid
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from runonce.connectors.sandbox.http_vendors import VendorServer
from runonce.connectors.sandbox.smtp_server import SmtpServer
from runonce.sdk.submit import Submitter
from runonce.testkit.watch import DecisionWatcher
from runonce.settings import Settings

from tests.support.worker import RunonceProcess, WorkerProcess, start_group_at_end

pytestmark = [pytest.mark.broker, pytest.mark.slow]


@pytest.fixture(scope="module")
def stream_worker(broker: Settings, decision_log: DecisionWatcher,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """The gateway sits in front of the SDK, the same for both runtimes: one (the default) is enough."""
    worker = WorkerProcess(broker, "mcp-worker", tmp_path_factory.mktemp("worker-logs"), runtime="transactional")
    worker.start()
    try:
        with Submitter(broker.bootstrap_servers(), agent_id="probe") as sub:
            probe = sub.submit("update_salesforce_field", {"probe": uuid.uuid4().hex})
        decision_log.wait([probe], timeout_s=120)
        yield worker
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def stack(broker: Settings, stream_worker: WorkerProcess,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VendorServer, SmtpServer, dict[str, str]]]:
    vendors = VendorServer().start()
    smtp = SmtpServer(vendors.ledger).start()
    local = broker.with_(vendor_url=vendors.url, smtp_address=f"127.0.0.1:{smtp.port}")
    env = local.child_env(os.environ)
    logs = tmp_path_factory.mktemp("executor-logs")
    run = uuid.uuid4().hex[:6]
    executors = []
    for vendor in ("smtp", "payments", "slack"):
        group = f"runonce-exec-{vendor}-{run}"
        start_group_at_end(broker.bootstrap_servers(), group)
        p = RunonceProcess(broker, f"exec-{vendor}", ["executor", "--vendor", vendor, "--group", group,
                                                      "--slot", run], logs, env)
        p.start()
        executors.append(p)
    yield vendors, smtp, env
    for p in executors:
        p.stop()
    smtp.stop()
    vendors.stop()


@asynccontextmanager
async def stdio_session(env: dict[str, str], *args: str, agent: str = "sales-agent") -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "runonce", "mcp", *args], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, client_info=_client_info(agent)) as session:
            await session.initialize()
            yield session


def _client_info(name: str) -> Any:
    from mcp.types import Implementation

    return Implementation(name=name, version="1")


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any], bool]:
    result = await session.call_tool(tool, args, read_timeout_seconds=timedelta(seconds=120))
    text = " ".join(c.text for c in result.content if c.type == "text")
    return text, dict(result.structuredContent or {}), bool(result.isError)


def test_47_tool_calls_with_timeouts_and_retries_send_one_email(
        stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    vendors, smtp, env = stack
    email = {"to": f"john-{uuid.uuid4().hex[:6]}@prospect.example", "subject": "Following up", "body": "Hi John"}
    smtp.set_delay(8.0)  # the relay takes 8 s to answer; the gateway answers "no outcome yet" after 3 s

    async def agent() -> tuple[list[tuple[str, dict[str, Any], bool]], int]:
        async with stdio_session(env, "--timeout-s", "3") as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert "send_email" in tools and "execute_database_write" not in tools
            assert "to" in tools["send_email"].inputSchema["required"]

            async def until_final() -> tuple[tuple[str, dict[str, Any], bool], int]:
                calls = 0
                while True:  # what a framework does with "no outcome yet": call again
                    calls += 1
                    text, facts, is_error = await call(session, "send_email", email)
                    if facts.get("status") != "pending":
                        return (text, facts, is_error), calls
                    assert "calling again with the same arguments is safe" in text

            first, first_calls = await until_final()  # the first call times out at least once
            rest = await asyncio.gather(*(until_final() for _ in range(46)))
            return [first, *(r for r, _ in rest)], first_calls + sum(n for _, n in rest)

    try:
        answers, calls = asyncio.run(agent())
    finally:
        smtp.set_delay(0.0)
    sent = [e for e in vendors.ledger.effects("smtp") if e.detail["to"] == email["to"]]
    assert len(sent) == 1
    assert len(answers) == 47 and calls > 47  # retries happened
    assert {facts["vendor_ref"] for _, facts, _ in answers} == {sent[0].key}  # the Message-ID
    assert {facts["status"] for _, facts, _ in answers} == {"succeeded"}
    assert not any(is_error for _, _, is_error in answers)
    performed = [text for text, facts, _ in answers if facts["result_of"] == facts["action_id"]]
    assert len(performed) <= 1  # the first logical call's own action (if its last retry was the original)
    repeats = [text for text, facts, _ in answers if facts["result_of"] != facts["action_id"]]
    assert len(repeats) >= 46 and all(t.startswith("Not performed again: this call repeats action") for t in repeats)


def test_a_denied_tool_is_not_offered_and_a_call_to_it_is_refused(
        stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    _, _, env = stack

    async def agent() -> tuple[str, dict[str, Any], bool]:
        async with stdio_session(env) as session:
            return await call(session, "execute_database_write", {"sql": "DROP TABLE users"})

    text, facts, is_error = asyncio.run(agent())
    assert is_error and text.startswith("Denied")
    assert facts["drop_reason"] == "tool_denied"


def test_a_vendor_that_never_answers_is_in_doubt_not_a_hang(
        stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    from runonce.connectors.sandbox.faults import Fault

    vendors, _, env = stack
    channel = f"ops-{uuid.uuid4().hex[:6]}"
    vendors.state.faults.add(Fault(prefix=f"/slack/{channel}", drop_response=1))  # posts, then hangs up

    async def agent() -> tuple[str, dict[str, Any], bool]:
        async with stdio_session(env, "--timeout-s", "60") as session:
            return await call(session, "post_slack_message", {"channel": f"#{channel}", "text": "db latency high"})

    started = time.monotonic()
    text, facts, is_error = asyncio.run(agent())
    assert time.monotonic() - started < 60  # an answer, not the gateway's timeout
    assert is_error and facts["status"] == "in_doubt"
    assert text.startswith("Outcome unknown (in_doubt)") and "Calling again will not perform it twice" in text
    assert len(vendors.ledger.effects("slack")) == 1  # it happened, once: only the answer was lost


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_over_http_a_retried_charge_is_charged_once(broker: Settings,
                                                    stack: tuple[VendorServer, SmtpServer, dict[str, str]],
                                                    tmp_path: Path) -> None:
    vendors, _, env = stack
    port = _free_port()
    gateway = RunonceProcess(broker, "mcp-http", ["mcp", "--http", str(port)], tmp_path, env)
    gateway.start()
    key = f"booking-{uuid.uuid4().hex[:8]}"

    async def agent() -> list[tuple[str, dict[str, Any], bool]]:
        deadline = time.monotonic() + 60
        while True:  # the gateway reads its outcome topics before it listens
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, gateway.log_tail()
                await asyncio.sleep(0.5)
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, _):
            async with ClientSession(read, write, client_info=_client_info("booking-agent")) as session:
                await session.initialize()
                charge = {"card": "tok_visa", "amount_cents": 41900, "idempotency_key": key}
                return [await call(session, "charge_payment", charge) for _ in range(3)]

    try:
        answers = asyncio.run(agent())
    finally:
        gateway.stop()
    first, *retries = answers
    assert first[1]["status"] == "succeeded" and first[0].startswith("Done")
    assert all(r[1]["vendor_ref"] == first[1]["vendor_ref"] and r[1]["result_of"] == first[1]["action_id"]
               and r[0].startswith("Not performed again") for r in retries)
    assert vendors.ledger.count("payments", key) == 1
