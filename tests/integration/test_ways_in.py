"""Every way an agent comes in, against one stack (the real broker, a stream worker, executors,
the sandbox vendors): MCP on stdio (`runonce mcp`, driven by the mcp package's own client);
the HTTP gateway (`runonce gateway serve`) with its bearer tokens, over MCP, from Python's
plain urllib and from a Node script using fetch; LangChain and the OpenAI Agents SDK tools.
Each sandbox records every request, so a second side effect is visible."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Iterator, Literal

import mcp_types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict

from runonce import tokens as token_store
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.connectors.vendors.sandbox.smtp_server import SmtpServer
from runonce.ops import child
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from runonce.testkit.agents import http
from runonce.testkit.proxy import RoundRobin
from tests.support.worker import RunonceProcess, WorkerProcess, start_group_at_end

pytestmark = [pytest.mark.broker, pytest.mark.slow]

TASKS = "io.modelcontextprotocol/tasks"


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
    sandbox = LocalVendors(tmp_path_factory.mktemp("sandbox")).start()
    vendors, smtp = sandbox.vendors, sandbox.smtp
    env = broker.with_(connectors_file=sandbox.write_connectors()).child_env(os.environ)
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
    sandbox.stop()


@asynccontextmanager
async def stdio_session(env: dict[str, str], *args: str, agent: str = "sales-agent") -> AsyncIterator[ClientSession]:
    """``agent``: the name the MCP client gives itself (never the actions' agent id)."""
    python, *command = child.argv("mcp", *args)
    params = StdioServerParameters(command=python, args=command, env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, client_info=_client_info(agent)) as session:
            await session.initialize()
            yield session


def _client_info(name: str) -> Any:
    from mcp.types import Implementation

    return Implementation(name=name, version="1")


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any], bool]:
    result = await session.call_tool(tool, args, read_timeout_seconds=120.0)
    text = " ".join(c.text for c in result.content if c.type == "text")
    return text, dict(result.structured_content or {}), bool(result.is_error)


def test_47_tool_calls_with_timeouts_and_retries_send_one_email(
        stack: tuple[VendorServer, SmtpServer, dict[str, str]], decision_log: DecisionWatcher) -> None:
    vendors, smtp, env = stack
    email = {"to": f"john-{uuid.uuid4().hex[:6]}@prospect.example", "subject": "Following up", "body": "Hi John"}
    smtp.set_delay(8.0)  # the relay takes 8 s to answer; the gateway answers "no outcome yet" after 3 s

    async def agent() -> tuple[list[tuple[str, dict[str, Any], bool]], int]:
        async with stdio_session(env, "--timeout-s", "3", "--agent", "crm-followups", agent="ceo") as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert "send_email" in tools and "execute_database_write" not in tools
            assert "to" in tools["send_email"].input_schema["required"]

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
    # the operator named this stdio gateway's agent; the client's own name ("ceo") is not used
    decided = decision_log.wait([answers[0][1]["action_id"]], timeout_s=30)
    assert {d["request"]["agent_id"] for d in decided.values()} == {"crm-followups"}


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
    from runonce.connectors.vendors.sandbox.faults import VendorFault

    vendors, _, env = stack
    channel = f"ops-{uuid.uuid4().hex[:6]}"
    vendors.state.faults.add(VendorFault(prefix="/api/chat.postMessage", drop_response=1))  # posts, then hangs up

    async def agent() -> tuple[str, dict[str, Any], bool]:
        async with stdio_session(env, "--timeout-s", "60") as session:
            return await call(session, "post_slack_message", {"channel": f"#{channel}", "text": "db latency high"})

    started = time.monotonic()
    text, facts, is_error = asyncio.run(agent())
    assert time.monotonic() - started < 60  # an answer, not the gateway's timeout
    assert is_error and facts["status"] == "in_doubt"
    assert text.startswith("Outcome unknown (in_doubt)") and "Calling again will not perform it twice" in text
    assert len(vendors.ledger.effects("slack")) == 1  # it happened, once: only the answer was lost


# -- the HTTP gateway: bearer tokens, MCP over HTTP, the HTTP API --------------------------

@dataclass(frozen=True)
class Gateway:
    url: str
    tokens: dict[str, str]
    tokens_file: Path
    process: RunonceProcess


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def gateway(broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    _, _, env = stack
    home = tmp_path_factory.mktemp("gateway")
    tokens_file = home / "gateway.tokens"
    issued = {"billing-agent": token_store.add(tokens_file, "billing-agent", frozenset({"charge_payment"})),
              "ops-agent": token_store.add(tokens_file, "ops-agent", None),
              "intern": token_store.add(tokens_file, "intern", None)}
    g = start_gateway(broker, env, home, tokens_file, issued, "gateway")
    yield g
    g.process.stop()


def start_gateway(broker: Settings, env: dict[str, str], home: Path, tokens_file: Path,
                  issued: dict[str, str], name: str) -> Gateway:
    """One ``runonce gateway serve`` on a free port, listening."""
    port = _free_port()
    process = RunonceProcess(broker, name, ["gateway", "serve", "--port", str(port), "--tokens", str(tokens_file)],
                             home, env)
    process.start()
    deadline = time.monotonic() + 60
    while True:  # the gateway reads its outcome topics before it listens
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert time.monotonic() < deadline and process.alive(), process.log_tail()
            time.sleep(0.3)
    return Gateway(f"http://127.0.0.1:{port}", issued, tokens_file, process)


def charges(vendors: VendorServer, key: str) -> int:
    """Charges the sandbox made for ``key``: its vendor key is the caller's key as its tenant's
    own (``tenant/billing-agent/<key>`` for a gateway token's agent, the key itself for the SDK's
    default tenant)."""
    return sum(1 for e in vendors.ledger.effects("payments") if e.key == key or e.key.endswith(f"/{key}"))


def charged(vendors: VendorServer, amount_cents: int) -> int:
    """Charge requests the payments sandbox received for this amount (each test's own)."""
    return sum(1 for r in vendors.ledger.requests("/v1/charges") if json.loads(r.body).get("amount") == str(amount_cents))


def decodes_to(codec: Any, value: bytes | None, expect: str, action_id: str) -> bool:
    """Whether a record is this action's (a foreign writer's records on the session's topics are not)."""
    try:
        decoded = codec.decode(value, expect=expect)[1]
    except Exception:
        return False
    return bool((decoded["request"]["action_id"] if expect == "ActionDecision" else decoded["action_id"]) == action_id)


@asynccontextmanager
async def http_session(url: str, token: str, name: str, modern: bool = False,
                       keep_alive: bool = True) -> AsyncIterator[ClientSession]:
    """An MCP session over streamable HTTP with a bearer token; ``name``: the client's own.
    ``modern``: the 2026-07-28 revision (``server/discover``, no session, every request on its
    own), else the initialize handshake of the revisions before it. ``keep_alive=False``: a
    new connection for every request (behind a per-connection balancer, each may meet another
    replica)."""
    import httpx2

    limits = httpx2.Limits() if keep_alive else httpx2.Limits(max_keepalive_connections=0)
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120,
                                  limits=limits) as client:
        async with streamable_http_client(f"{url}/mcp", http_client=client) as (read, write):
            async with ClientSession(read, write, client_info=_client_info(name)) as session:
                if modern:
                    found = await session.discover()
                    assert "2026-07-28" in found.supported_versions, found.supported_versions
                else:
                    await session.initialize()
                yield session


def test_the_gateway_lets_in_only_tokens_and_each_calls_what_its_token_allows(
        gateway: Gateway, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    vendors, _, env = stack
    charge = f"{gateway.url}/v1/actions/charge_payment?wait=30"
    for url, method in ((charge, "POST"), (f"{gateway.url}/mcp", "POST")):
        for token in (None, "not-a-token"):
            status, headers, _ = http(method, url, token, {})
            assert status == 401, (url, token, status)
            assert headers["www-authenticate"].startswith("Bearer ")

    # a tool the token does not name: refused before anything is published, and recorded
    channel = f"#refused-{uuid.uuid4().hex[:6]}"
    status, _, body = http("POST", f"{gateway.url}/v1/actions/post_slack_message?wait=5",
                           gateway.tokens["billing-agent"], {"channel": channel, "text": "hi"})
    assert status == 403 and "may not call post_slack_message" in body["error"]

    async def over_mcp() -> tuple[set[str], tuple[str, dict[str, Any], bool]]:
        async with http_session(gateway.url, gateway.tokens["billing-agent"], "ops-agent") as session:
            listed = {t.name for t in (await session.list_tools()).tools}
            return listed, await call(session, "post_slack_message", {"channel": channel, "text": "hi"})

    listed, (text, facts, is_error) = asyncio.run(over_mcp())
    assert listed == {"charge_payment"}  # a model is offered only what its token may call
    assert is_error and text.startswith("Refused: this agent (billing-agent) is not allowed")
    assert not [r for r in vendors.ledger.requests() if channel.lstrip("#") in r.path + r.body]
    assert gateway.process.log_tail(200).count("refused: agent billing-agent called post_slack_message") == 2
    metrics = http("GET", f"{gateway.url}/metrics")[2]  # Prometheus text: no token needed, it performs nothing
    assert ('runonce_gateway_refused_total{agent="billing-agent",tool="post_slack_message",why="not_allowed"} 2.0'
            in metrics), metrics

    # a revoked token stops working at once, without a restart
    intern = gateway.tokens["intern"]
    assert http("GET", f"{gateway.url}/v1/actions/nothing?wait=0", intern)[0] == 404  # let in: unknown action
    revoke = child.run(["gateway", "token", "revoke", "intern", "--tokens", str(gateway.tokens_file)], env, 60)
    assert revoke.returncode == 0, revoke.stderr
    assert http("GET", f"{gateway.url}/v1/actions/nothing?wait=0", intern)[0] == 401
    assert intern not in gateway.tokens_file.read_text() and intern not in gateway.process.log_tail(500)


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
def test_over_mcp_on_http_the_agent_is_its_token_whatever_the_client_calls_itself(
        gateway: Gateway, stack: tuple[VendorServer, SmtpServer, dict[str, str]],
        decision_log: DecisionWatcher, modern: bool) -> None:
    """Both ways a 2.x client speaks to the gateway: the initialize handshake (2025-11-25 and
    before) and the stateless 2026-07-28 revision (``server/discover``, no session id)."""
    vendors, _, _ = stack
    key = f"booking-{uuid.uuid4().hex[:8]}"

    async def agent() -> list[tuple[str, dict[str, Any], bool]]:
        async with http_session(gateway.url, gateway.tokens["billing-agent"], "ceo-agent", modern) as session:
            charge = {"card": "tok_visa", "amount_cents": 41900, "idempotency_key": key}
            return [await call(session, "charge_payment", charge) for _ in range(3)]

    first, *retries = asyncio.run(agent())
    assert first[1]["status"] == "succeeded" and first[0].startswith("Done")
    assert all(r[1]["vendor_ref"] == first[1]["vendor_ref"] and r[1]["result_of"] == first[1]["action_id"]
               and r[0].startswith("Not performed again") for r in retries)
    assert charges(vendors, key) == 1
    decided = decision_log.wait([a[1]["action_id"] for a in (first, *retries)], timeout_s=30)
    assert {d["request"]["agent_id"] for d in decided.values()} == {"billing-agent"}


@pytest.fixture(scope="module")
def replicas(broker: Settings, gateway: Gateway, stack: tuple[VendorServer, SmtpServer, dict[str, str]],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RoundRobin, Gateway, Gateway]]:
    """A second gateway on the same tokens, and a balancer without affinity in front of both."""
    _, _, env = stack
    second = start_gateway(broker, env, tmp_path_factory.mktemp("gateway-2"), gateway.tokens_file, gateway.tokens,
                           "gateway-2")
    balancer = RoundRobin([("127.0.0.1", int(g.url.rsplit(":", 1)[1])) for g in (gateway, second)]).start()
    yield balancer, gateway, second
    balancer.stop()
    second.process.stop()


def answered(g: Gateway, tool: str) -> float:
    """What one replica's /metrics says it answered of ``tool``, every status summed."""
    metrics = http("GET", f"{g.url}/metrics")[2]
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("runonce_gateway_calls_total{") and f'tool="{tool}"' in line)


def test_calls_with_one_key_alternating_between_two_gateways_charge_once(
        replicas: tuple[RoundRobin, Gateway, Gateway], stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """MCP 2026-07-28 is stateless so that any replica may answer any call: four calls with
    one key, each on a new connection through a round-robin, so both gateways take some. No replica
    holds anything the other needs: the key's first action is decided in Kafka.
    Catches: a gateway that keys a call by anything of its own (a process-local memory of
    keys, the JSON-RPC request id) where the agent's key is meant: two charges."""
    balancer, one, two = replicas
    vendors, _, _ = stack
    key = f"rr-{uuid.uuid4().hex[:8]}"
    before = (answered(one, "charge_payment"), answered(two, "charge_payment"))

    async def agent() -> list[tuple[str, dict[str, Any], bool]]:
        async with http_session(balancer.url, one.tokens["billing-agent"], "billing", modern=True,
                                keep_alive=False) as session:
            charge = {"card": "tok_visa", "amount_cents": 1250, "idempotency_key": key}
            return [await call(session, "charge_payment", charge) for _ in range(4)]

    first, *retries = asyncio.run(agent())
    assert first[1]["status"] == "succeeded", first
    assert all(r[1]["vendor_ref"] == first[1]["vendor_ref"] and r[1]["result_of"] == first[1]["action_id"]
               for r in retries), retries
    assert charges(vendors, key) == 1
    # the balancer did alternate: both replicas answered some of the four calls (the client's
    # other requests, server/discover among them, take turns too)
    took = (answered(one, "charge_payment") - before[0], answered(two, "charge_payment") - before[1])
    assert sum(took) == 4 and min(took) >= 1, took


def test_a_response_stream_cut_mid_call_and_the_call_issued_again_charge_once(
        replicas: tuple[RoundRobin, Gateway, Gateway], stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """MCP 2026-07-28 removed SSE resumability: a response stream lost mid-call loses the
    call's answer, and the client issues the call again with a new request id, here on the
    other replica. The charge was under way at the vendor (slow) when the link dropped.
    Catches: the same as above, and a gateway that answers a repeat before its original's
    outcome is known (the second answer would not carry the first's vendor_ref)."""
    from runonce.connectors.vendors.sandbox.faults import VendorFault

    balancer, one, _ = replicas
    vendors, _, _ = stack
    key = f"cut-{uuid.uuid4().hex[:8]}"
    charge = {"card": "tok_visa", "amount_cents": 990, "idempotency_key": key}
    vendors.state.faults.add(VendorFault("/v1/charges", delay_s=2.0))  # the vendor is still working when the link drops
    balancer.cut_next(b'"tools/call"', after_s=0.5)

    async def agent() -> tuple[BaseException | None, tuple[str, dict[str, Any], bool]]:
        lost: BaseException | None = None
        try:  # the 2.x client raises the lost stream out of its transport's task group
            async with http_session(balancer.url, one.tokens["billing-agent"], "billing", modern=True,
                                    keep_alive=False) as session:
                await session.call_tool("charge_payment", charge, read_timeout_seconds=30.0)
        except Exception as exc:  # the answer is lost; how the client words it is its own
            lost = exc
        async with http_session(balancer.url, one.tokens["billing-agent"], "billing", modern=True,
                                keep_alive=False) as session:
            return lost, await call(session, "charge_payment", charge)

    try:
        lost, again = asyncio.run(agent())
    finally:
        vendors.state.faults.clear()
    assert balancer.cuts == 1 and lost is not None, "the fault never applied: the first call was answered"
    assert again[1]["status"] == "succeeded" and not again[2], again
    assert again[1]["action_id"] != again[1]["result_of"], "the call issued again was taken as a first"
    assert charges(vendors, key) == 1
    assert len(vendors.ledger.requests("/v1/charges", containing=key)) == 1  # asked once, not deduplicated


class TaskFields(mcp_types.Result):
    """A task as the client reads it: ``CreateTaskResult`` and ``GetTaskResult`` share these."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskSeen(TaskFields):
    """``CreateTaskResult``: a tools/call answered with a task."""

    result_type: Literal["task"] = "task"


class PolledTask(TaskFields):
    """``GetTaskResult``."""

    result_type: Literal["complete"] = "complete"


class CancelAck(mcp_types.Result):
    """``CancelTaskResult``: an empty acknowledgement."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["complete"] = "complete"


@asynccontextmanager
async def task_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """A 2026-07-28 session that declares the tasks extension on its calls and takes a task
    for an answer (the SDK's claim mechanism: ``allow_claimed=True`` hands it over as is)."""
    import httpx2
    from mcp.client.extension import ResultClaim

    async def not_resolved(claimed: TaskSeen, ctx: Any) -> Any:
        raise AssertionError("the test polls the task itself")

    claim = ResultClaim(result_type="task", model=TaskSeen, resolve=not_resolved)
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
        async with streamable_http_client(f"{url}/mcp", http_client=client) as (read, write):
            async with ClientSession(read, write, client_info=_client_info("tasks-agent"),
                                     extensions={TASKS: {}}, result_claims={TASKS: [claim]}) as session:
                found = await session.discover()
                assert TASKS in (found.capabilities.extensions or {}), found.capabilities
                yield session


async def poll(session: ClientSession, task_id: str) -> PolledTask:
    request = mcp_types.Request[Any, Any](method="tasks/get", params={"taskId": task_id})
    return await session.send_request(request, PolledTask, request_read_timeout_seconds=60.0)


def test_a_held_charge_is_a_task_that_any_gateway_answers_and_the_approval_completes(
        broker: Settings, replicas: tuple[RoundRobin, Gateway, Gateway],
        stack: tuple[VendorServer, SmtpServer, dict[str, str]], tmp_path: Path) -> None:
    """MCP 2026-07-28 with the tasks extension: a charge above the shipped policy's threshold
    is held for a person; the call answers at once with a task in ``working``. Its state is
    the action's, read from Kafka: the other replica answers a poll, and so does a gateway
    started after the task was created. The approver's release completes the task with the
    charge's result; a denied one fails with the reason. The agent cancels a third task on
    the other replica (``tasks/cancel``): it ends ``cancelled`` and a person's approve after
    it performs nothing; cancelling it again is refused (it has ended).
    Catches: the task's state kept in the creating gateway's memory (the other replicas do
    not find it); ``look_up`` not following the release to the executor's result (the task
    stays ``working``); a denial reported as completed; a cancel the stream job does not
    decide (the task stays ``working``, or the approve after it charges the card)."""
    from runonce.approvals.client import Approvals
    from runonce.core.approval import Verdict

    _, one, two = replicas
    vendors, _, env = stack
    token = one.tokens["billing-agent"]
    keys = {verdict: f"task-{verdict.value}-{uuid.uuid4().hex[:6]}" for verdict in Verdict}

    async def create(url: str, key: str) -> TaskSeen:
        async with task_session(url, token) as session:
            answer = await session.call_tool("charge_payment", {"card": "tok_visa", "amount_cents": 1_500_000,
                                                                "idempotency_key": key}, allow_claimed=True)
            assert isinstance(answer, TaskSeen), answer  # not a text that says "waiting"
            return answer

    async def state(url: str, task_id: str) -> PolledTask:
        async with task_session(url, token) as session:
            return await poll(session, task_id)

    async def cancel(url: str, task_id: str) -> BaseException | None:
        async with task_session(url, token) as session:
            request = mcp_types.Request[Any, Any](method="tasks/cancel", params={"taskId": task_id})
            try:
                await session.send_request(request, CancelAck, request_read_timeout_seconds=60.0)
            except Exception as exc:
                return exc
        return None

    made = {verdict: asyncio.run(create(one.url, key)) for verdict, key in keys.items()}
    cancel_key = f"task-cancel-{uuid.uuid4().hex[:6]}"
    given_up = asyncio.run(create(one.url, cancel_key))
    for task in (*made.values(), given_up):
        assert task.result_type == "task" and task.status == "working", task
        assert "approval" in (task.status_message or ""), task.status_message
    # the other replica, which never saw the call, finds it in Kafka, and takes its cancel
    assert asyncio.run(state(two.url, made[Verdict.APPROVE].task_id)).status == "working"
    assert asyncio.run(cancel(two.url, given_up.task_id)) is None
    deadline = time.monotonic() + 60
    ended = asyncio.run(state(two.url, given_up.task_id))
    while ended.status == "working" and time.monotonic() < deadline:
        time.sleep(0.5)
        ended = asyncio.run(state(two.url, given_up.task_id))
    assert ended.status == "cancelled" and ended.result is None and ended.error is None, ended
    # a gateway started after the tasks were made: nothing of them in its memory
    late = start_gateway(broker, env, tmp_path, one.tokens_file, one.tokens, "gateway-late")
    try:
        with Approvals(broker.bootstrap_servers(), "carol") as carol:
            for verdict, task in made.items():
                carol.verdict(task.task_id.split(".")[0], verdict, "test")
            # after the cancel was decided: this approve finds the hold denied by the agent
            late_yes = carol.verdict(given_up.task_id.split(".")[0], Verdict.APPROVE, "test")
        assert (late_yes.change, late_yes.note) == ("none", "already denied by agent:billing-agent"), late_yes
        deadline = time.monotonic() + 90
        polled = {v: asyncio.run(state(late.url, t.task_id)) for v, t in made.items()}
        while any(p.status == "working" for p in polled.values()) and time.monotonic() < deadline:
            time.sleep(1.0)
            polled = {v: asyncio.run(state(late.url, t.task_id)) for v, t in made.items()}
        again = asyncio.run(cancel(late.url, given_up.task_id))
    finally:
        late.process.stop()
    assert "has ended (dropped)" in str(again), again
    assert charges(vendors, cancel_key) == 0
    done, denied = polled[Verdict.APPROVE], polled[Verdict.DENY]
    assert done.status == "completed" and done.result is not None, done
    assert done.result["structuredContent"]["status"] == "succeeded" and not done.result["isError"], done.result
    assert done.result["structuredContent"]["vendor_ref"], done.result
    assert denied.status == "failed" and denied.error is not None and "denied" in denied.error["message"], denied
    assert charges(vendors, keys[Verdict.APPROVE]) == 1 and charges(vendors, keys[Verdict.DENY]) == 0
    # another tenant's caller does not find the task (not found, not forbidden)
    other = one.tokens["ops-agent"]

    async def foreign() -> BaseException | None:
        async with task_session(one.url, other) as session:
            try:
                await poll(session, made[Verdict.APPROVE].task_id)
            except Exception as exc:
                return exc
        return None

    assert "no task" in str(asyncio.run(foreign()))


def legacy_client(broker: Settings, *args: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """tests/mcp1/client.py on the 1.x SDK, in the venv scripts/setup.sh made for it."""
    python = broker.cache_dir / "venvs" / "mcp1" / "bin" / "python"
    assert python.exists(), f"{python}: no venv with the 1.x MCP SDK; run scripts/setup.sh"
    run = subprocess.run([str(python), str(Path(__file__).parents[1] / "mcp1" / "client.py"), *args],
                         capture_output=True, text=True, timeout=180, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads(line) for line in run.stdout.splitlines()]


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_an_agent_on_the_legacy_1x_sdk_is_served_and_charged_once(
        broker: Settings, gateway: Gateway, stack: tuple[VendorServer, SmtpServer, dict[str, str]],
        transport: str) -> None:
    """The gateway runs on mcp 2.x; agents on the 1.x SDK (security fixes only, and many of
    them) still speak the initialize handshake and must be served from the same endpoint.
    Catches: a gateway that serves only the 2026-07-28 revision (the handshake refused), or
    one that reads 2.x-only fields of a call."""
    vendors, _, env = stack
    key = f"legacy-{uuid.uuid4().hex[:8]}"
    charge = json.dumps({"card": "tok_visa", "amount_cents": 700, "idempotency_key": key})
    if transport == "http":
        agreed, *answers = legacy_client(broker, "http", gateway.url, gateway.tokens["billing-agent"],
                                         "charge_payment", charge, "3")
    else:
        agreed, *answers = legacy_client(broker, "stdio", sys.executable, "charge_payment", charge, "3",
                                         env=env)
    assert agreed["protocol"] == agreed["asked"] < "2026-07-28", agreed  # the 1.x SDK's newest (2025-11-25)
    first, *retries = answers
    assert first["facts"]["status"] == "succeeded" and not first["is_error"], first
    assert all(r["facts"]["vendor_ref"] == first["facts"]["vendor_ref"] for r in retries), retries
    assert charges(vendors, key) == 1


def test_a_node_agent_retrying_a_slow_charge_four_times_is_charged_once(
        gateway: Gateway, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """The 4-charge incident, from JavaScript with fetch: four identical answers, one charge."""
    from runonce.connectors.vendors.sandbox.faults import VendorFault

    vendors, _, _ = stack
    key = f"order-{uuid.uuid4().hex[:8]}"
    vendors.state.faults.add(VendorFault("/v1/charges", delay_s=2.0))  # a slow processor: the retries overlap it
    try:
        run = subprocess.run(["node", str(Path(__file__).parents[1] / "node" / "four_retries.mjs"),
                              gateway.url, gateway.tokens["billing-agent"], key],
                             capture_output=True, text=True, timeout=120)
    finally:
        vendors.state.faults.clear()
    assert run.returncode == 0, run.stderr
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(answers) == 4 and {a["status"] for a in answers} == {200}
    assert len({a["body"] for a in answers}) == 1, answers  # four identical answers ...
    body = json.loads(answers[0]["body"])
    assert body["status"] == "succeeded" and body["advice"].startswith("done")
    assert [a["replayed"] for a in answers].count(None) == 1  # ... one of them the original's own
    assert len({a["action"] for a in answers}) == 4  # four calls, four actions published ...
    assert charges(vendors, key) == 1  # ... one charge
    assert len(vendors.ledger.requests("/v1/charges", containing=key)) == 1  # asked once, not deduplicated


def test_the_http_api_answers_a_retry_a_misused_key_and_a_late_outcome_as_stripe_would(
        gateway: Gateway, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    from openapi_spec_validator import validate

    vendors, _, _ = stack
    token = gateway.tokens["ops-agent"]
    key = f"refund-{uuid.uuid4().hex[:8]}"
    url = f"{gateway.url}/v1/actions/charge_payment"
    status, headers, pending = http("POST", f"{url}?wait=0", token, {"card": "tok_visa", "amount_cents": 500},
                                    {"Idempotency-Key": key})
    assert status == 202 and pending["status"] == "pending" and headers["location"].startswith("/v1/actions/")
    status, _, done = http("GET", f"{gateway.url}{headers['location']}?wait=30", token)
    assert status == 200 and done["status"] == "succeeded" and done["action_id"] == pending["action_id"]
    status, again_headers, again = http("POST", f"{url}?wait=30", token, {"card": "tok_visa", "amount_cents": 500},
                                        {"Idempotency-Key": key})
    assert (status, again_headers["idempotent-replayed"]) == (200, "true")
    assert again == {**done, "tool": "charge_payment"}  # the first call's answer
    status, _, misused = http("POST", f"{url}?wait=30", token, {"card": "tok_visa", "amount_cents": 99_900},
                              {"Idempotency-Key": key})
    assert status == 422 and misused["reason"] == "key_payload_mismatch"
    assert charges(vendors, key) == 1
    assert http("POST", f"{gateway.url}/v1/actions/no_such_tool", token, {})[0] == 404
    assert http("POST", f"{url}?wait=forever", token, {})[0] == 400
    status, _, spec = http("GET", f"{gateway.url}/openapi.json")  # a description: no token needed
    assert status == 200 and "/v1/actions/charge_payment" in spec["paths"]
    validate(spec)  # raises on an invalid OpenAPI document


def test_a_key_belongs_to_its_tenant_another_can_neither_read_nor_block_the_action(
        gateway: Gateway, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """Agent B, with its own token (its own tenant), reuses agent A's key: B gets its own
    action and its own charge, never A's answer (nor a 422 confirming A used the key), cannot
    read A's action by id (404, not 403), and B using a key first never gets A's charge dropped
    as B's repeat."""
    vendors, _, _ = stack
    a = token_store.add(gateway.tokens_file, "tenant-a-agent", frozenset({"charge_payment"}))
    b = token_store.add(gateway.tokens_file, "tenant-b-agent", frozenset({"charge_payment"}))
    url = f"{gateway.url}/v1/actions/charge_payment?wait=30"
    charge = {"card": "tok_visa", "amount_cents": 1200}
    key = f"order-{uuid.uuid4().hex[:8]}"
    status, _, first = http("POST", url, a, charge, {"Idempotency-Key": key})
    assert status == 200 and first["status"] == "succeeded", first
    status, headers, other = http("POST", url, b, charge, {"Idempotency-Key": key})
    assert status == 200 and other["status"] == "succeeded" and "idempotent-replayed" not in headers, other
    assert (other["action_id"], other["vendor_ref"]) != (first["action_id"], first["vendor_ref"])
    status, _, mismatch = http("POST", url, b, {**charge, "amount_cents": 999}, {"Idempotency-Key": key})
    assert status == 422 and mismatch["reason"] == "key_payload_mismatch"  # B's own key use, not A's
    assert http("GET", f"{gateway.url}/v1/actions/{first['action_id']}?wait=0", b)[0] == 404
    assert http("GET", f"{gateway.url}/v1/actions/{first['action_id']}?wait=0", a)[0] == 200
    assert charges(vendors, key) == 2  # one charge each, at the vendor too: the vendor key is the tenant's
    later = f"order-{uuid.uuid4().hex[:8]}"  # B first: A's real charge is not B's repeat
    assert http("POST", url, b, charge, {"Idempotency-Key": later})[2]["status"] == "succeeded"
    status, _, own = http("POST", url, a, charge, {"Idempotency-Key": later})
    assert status == 200 and own["status"] == "succeeded" and charges(vendors, later) == 2, own


def test_a_field_over_its_bound_is_refused_at_the_door_naming_it(
        gateway: Gateway, decision_log: DecisionWatcher) -> None:
    """A 5,000-character Idempotency-Key was taken with 202 and dead-lettered later, so the
    agent polled for ever: now a 400 naming the field and its bound, and nothing published."""
    token = gateway.tokens["ops-agent"]
    status, headers, refused = http("POST", f"{gateway.url}/v1/actions/charge_payment?wait=5", token,
                                    {"card": "tok_visa", "amount_cents": 5}, {"Idempotency-Key": "k" * 5000})
    assert status == 400 and "idempotency_key" in refused["error"] and "512" in refused["error"], refused
    assert "runonce-action-id" not in headers
    # A body declared over the bound is refused from its Content-Length, before a byte of it is
    # read: the client sends only the headers and reads the answer (one that pushed the body on
    # would meet a closed socket, as from any server that refuses a body unread)
    host, port = gateway.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(f"POST /v1/actions/charge_payment HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
                     f"Idempotency-Key: big-body\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {600 * 1024}\r\n\r\n".encode())
        raw = b""
        while b"\r\n\r\n" not in raw or len(raw.split(b"\r\n\r\n", 1)[1]) < int(
                re.search(rb"content-length: (\d+)", raw.lower()).group(1)):  # type: ignore[union-attr]
            chunk = conn.recv(65536)
            assert chunk, raw
            raw += chunk
    answer = raw.decode(errors="replace")
    assert answer.startswith("HTTP/1.1 413") and "bytes" in answer, answer[:300]
    time.sleep(2)  # a published action would be decided (or dead-lettered) by now
    seen = [d for d in decision_log.decisions() if len(d["request"]["idempotency_key"] or "") == 5000]
    assert seen == []  # the key over its bound published nothing


# -- agent frameworks: their own retries, made harmless ------------------------------------

def _attempts(decision_log: DecisionWatcher, agent_id: str) -> int:
    return sum(1 for d in decision_log.decisions() if d["request"]["agent_id"] == agent_id)


def test_langchains_retry_on_a_slow_tool_sends_one_email(
        broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]],
        decision_log: DecisionWatcher) -> None:
    """The 47-email incident in LangChain: the tool gives up after 1 s, the relay takes 4 s,
    and langchain-core's own ``with_retry`` calls again on every TimeoutError."""
    from runonce.integrations.langchain import langchain_tools
    from runonce.sdk.client import ActionClient

    vendors, smtp, _ = stack
    agent = f"lc-{uuid.uuid4().hex[:6]}"
    email = {"to": f"lead-{agent}@prospect.example", "subject": "Following up", "body": "Hi"}
    call = {"name": "send_email", "args": email, "id": "call-1", "type": "tool_call"}
    smtp.set_delay(4.0)
    try:
        with ActionClient(broker.bootstrap_servers(), agent_id=agent) as client:
            tool = {t.name: t for t in langchain_tools(client, timeout_s=1.0)}["send_email"]
            retrying = tool.with_retry(retry_if_exception_type=(TimeoutError,), stop_after_attempt=30,
                                       wait_exponential_jitter=False)
            first = retrying.invoke(call)
            attempts = _attempts(decision_log, agent)
            later = [tool.invoke({**call, "id": f"call-{i}"}) for i in range(2, 5)]  # the model calls again
    finally:
        smtp.set_delay(0.0)
    sent = [e for e in vendors.ledger.effects("smtp") if e.detail["to"] == email["to"]]
    assert len(sent) == 1 and attempts >= 2, attempts  # retried, and sent once
    assert first.artifact["status"] == "succeeded" and first.artifact["vendor_ref"] == sent[0].key
    assert all(m.artifact["result_of"] == first.artifact["result_of"] and m.artifact["vendor_ref"] == sent[0].key
               and str(m.content).startswith("Not performed again") for m in later)


def test_the_openai_agents_sdks_tool_timeout_and_a_model_calling_again_send_one_email(
        broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """The SDK's own ``timeout_seconds`` cancels the slow call and tells the model it timed
    out; the model calls again (as models do), the way the SDK's runner invokes a tool."""
    from agents.tool import invoke_function_tool
    from agents.tool_context import ToolContext

    from runonce.integrations.openai_agents import openai_agents_tools
    from runonce.sdk.client import ActionClient

    vendors, smtp, _ = stack
    email = {"to": f"lead-{uuid.uuid4().hex[:6]}@prospect.example", "subject": "Following up", "body": "Hi"}
    arguments = json.dumps(email)

    async def model(tool: Any) -> list[str]:
        said = []
        for n in range(30):
            ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id=f"call-{n}", tool_arguments=arguments)
            said.append(str(await invoke_function_tool(function_tool=tool, context=ctx, arguments=arguments)))
            if "timed out" not in said[-1]:
                return said
        return said

    smtp.set_delay(4.0)
    try:
        with ActionClient(broker.bootstrap_servers(), agent_id="oa-agent") as client:
            tool = {t.name: t for t in openai_agents_tools(client, timeout_s=1.0)}["send_email"]
            said = asyncio.run(model(tool))
            again = [asyncio.run(model(tool))[-1] for _ in range(2)]
    finally:
        smtp.set_delay(0.0)
    sent = [e for e in vendors.ledger.effects("smtp") if e.detail["to"] == email["to"]]
    assert len(sent) == 1
    assert len(said) >= 2 and said[0] == "Tool 'send_email' timed out after 1 seconds."
    assert sent[0].key in said[-1] and all(a.startswith("Not performed again") and sent[0].key in a for a in again)


# -- the docs: every snippet on the agents page runs as written ---------------------------

_RUNNERS = {"python": [sys.executable, "-"], "bash": ["bash", "-euo", "pipefail", "-s"],
            "js": ["node", "--input-type=module", "-"]}


def snippets(page: Path) -> list[tuple[str, str]]:
    """(language, code) of each fenced block a runner exists for."""
    found = re.findall(r"^```(\w+)\n(.*?)^```", page.read_text(), flags=re.S | re.M)
    return [(lang, code) for lang, code in found if lang in _RUNNERS]


def test_every_snippet_in_the_agents_page_runs(gateway: Gateway, stack: tuple[VendorServer, SmtpServer,
                                                                              dict[str, str]]) -> None:
    vendors, _, env = stack
    page = Path(__file__).parents[2] / "docs" / "agents.md"
    found = snippets(page)
    assert [lang for lang, _ in found] == ["python", "bash", "js", "python", "python", "python", "python", "python"]
    # the token the page makes: `runonce gateway token add billing-agent --tools charge_payment`
    run_env = {**env, "RUNONCE_GATEWAY": gateway.url, "RUNONCE_TOKEN": gateway.tokens["billing-agent"]}
    for lang, code in found:
        ran = subprocess.run(_RUNNERS[lang], input=code, env=run_env, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, f"{lang} snippet failed:\n{code}\n--- stderr\n{ran.stderr[-2000:]}"
        assert "succeeded" in ran.stdout, (code, ran.stdout)
    assert charges(vendors, "order-1001") == 1 and charges(vendors, "order-1002") == 1
    assert charges(vendors, "order-1003") == 1
    assert len([e for e in vendors.ledger.effects("smtp") if e.detail["to"] == "ada@example.com"]) == 1


def test_a_langgraph_node_replayed_after_interrupt_charges_once_where_a_model_key_would_charge_twice(
        broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """langgraph #7780, in LangGraph's own in-memory mode (``InMemorySaver``): a node charges,
    then asks a person with ``interrupt()``; resuming replays the node from its start. The
    charge's key is derived from the thread, the node's checkpoint namespace and the tool
    call's id: the replay is a repeat. The same graph with a key the model makes per call
    (what square-mcp-server tells a model to do) charges twice: the fault is real.
    Catches: a derived key that takes anything a replay changes (the run's wall clock, a new
    uuid, the ``__pregel_*`` scratch entries), or the model's key used as the key."""
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.types import Command, interrupt

    from runonce.integrations.langgraph import call_tool
    from runonce.sdk.client import ActionClient

    vendors, _, _ = stack
    amount = 31_000 + int(uuid.uuid4().int % 1000)

    def run(client: ActionClient, model_key: str | None) -> list[Any]:
        def plan(_: MessagesState) -> dict[str, Any]:
            args = {"card": "tok_visa", "amount_cents": amount, "idempotency_key": model_key or uuid.uuid4().hex}
            return {"messages": [AIMessage(content="", tool_calls=[
                {"name": "charge_payment", "args": args, "id": "call_1"}])]}

        answers: list[Any] = []

        def charge_then_confirm(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
            call = dict(state["messages"][-1].tool_calls[0])
            if model_key is None:  # the model's way: a fresh key on every run of the node
                call["args"] = {**call["args"], "idempotency_key": uuid.uuid4().hex}
                handle = client.submit("charge_payment", {k: v for k, v in call["args"].items()
                                                          if k != "idempotency_key"},
                                       idempotency_key=call["args"]["idempotency_key"])
                answers.append(handle.result(60))
            else:
                answers.append(call_tool(client, call, config, timeout_s=60))
            interrupt("a person confirms the charge")
            return {"messages": []}

        graph = StateGraph(MessagesState)
        graph.add_node("plan", plan)
        graph.add_node("charge", charge_then_confirm)
        graph.add_edge(START, "plan")
        graph.add_edge("plan", "charge")
        graph.add_edge("charge", END)
        app = graph.compile(checkpointer=InMemorySaver())
        config: RunnableConfig = {"configurable": {"thread_id": f"thread-{uuid.uuid4().hex[:8]}"}}
        assert "__interrupt__" in app.invoke({"messages": []}, config)
        app.invoke(Command(resume="yes"), config)  # the node runs again from its start
        return answers

    def charged_amount() -> int:
        return charged(vendors, amount)

    with ActionClient(broker.bootstrap_servers(), agent_id="langgraph-agent") as client:
        first, replay = run(client, model_key="model-made")
        assert charged_amount() == 1, "a replay under a derived key charged again"
        assert replay.artifact["result_of"] == first.artifact["action_id"]
        assert str(replay.content).startswith("Not performed again"), replay.content
        run(client, model_key=None)
    assert charged_amount() == 3  # the model's keys: two more charges, one per run of the node


def test_a_temporal_activity_retried_charges_once_and_another_activity_charges_again(
        broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """Temporal runs a failed or timed-out activity again from its start. In Temporal's own
    in-memory activity environment (``temporalio.testing.ActivityEnvironment``, the SDK's way
    to run an activity without a server), attempt 1 charges and then fails after the charge,
    attempt 2 (the same workflow run and activity id, ``attempt`` 2: what Temporal's retry
    delivers) is answered with attempt 1's charge. Another activity of the same run charges.
    Catches: a key that takes ``attempt`` or ``task_token`` (both change on a retry), or one
    without the activity id (two activities of a run would be one action)."""
    import dataclasses

    from temporalio import activity
    from temporalio.testing import ActivityEnvironment

    from runonce.integrations.temporal import perform
    from runonce.sdk.client import ActionClient

    vendors, _, _ = stack
    amount = 52_000 + int(uuid.uuid4().int % 1000)
    outcomes: list[Any] = []

    with ActionClient(broker.bootstrap_servers(), agent_id="temporal-worker") as client:
        @activity.defn
        async def charge(cents: int) -> str:
            outcome = await perform(client, "charge_payment", {"card": "tok_visa", "amount_cents": cents})
            outcomes.append(outcome)
            if activity.info().attempt == 1:
                raise RuntimeError("the worker lost its connection before it reported")  # Temporal retries
            return str(outcome.vendor_ref)

        env = ActivityEnvironment()
        run_id = uuid.uuid4().hex
        base = dataclasses.replace(env.info, workflow_id=f"order-{run_id[:8]}", workflow_run_id=run_id,
                                   activity_id="1")
        env.info = dataclasses.replace(base, attempt=1, task_token=b"t1")
        with pytest.raises(RuntimeError):
            asyncio.run(env.run(charge, amount))
        env.info = dataclasses.replace(base, attempt=2, task_token=b"t2")
        ref = asyncio.run(env.run(charge, amount))
        env.info = dataclasses.replace(base, activity_id="2", attempt=2, task_token=b"t3")
        other = asyncio.run(env.run(charge, amount))
    assert charged(vendors, amount) == 2  # the first activity once (two attempts), the second once
    assert ref == outcomes[0].vendor_ref and outcomes[1].result_of == outcomes[0].action_id
    assert other != ref


def test_a_natural_id_for_a_tool_without_a_write_once_rule_is_refused_at_the_door(broker: Settings) -> None:
    """It used to be published, dead-lettered by the stream job, and its caller waited out its
    timeout told "is a stream worker running?".
    Catches: ``ActionClient.submit`` without the scope check (nothing raised: it is published)."""
    from runonce.errors import InvalidAction
    from runonce.sdk.client import ActionClient

    with ActionClient(broker.bootstrap_servers(), agent_id="door") as client:
        with pytest.raises(InvalidAction, match="natural_id given but tool charge_payment has no write-once rule"):
            client.submit("charge_payment", {"card": "tok_visa", "amount_cents": 100}, idempotency_key="k",
                          natural_id="order-1")


def test_a_pydantic_ai_approved_call_resumed_twice_charges_once(
        broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """pydantic-ai #5536, in pydantic-ai's own in-memory mode (``FunctionModel`` plays the
    model): a charge that needs the application's approval ends the first run with a deferred
    call; the application resumes with the approval, and then resumes the same approval again
    (it crashed before it saved the new history, or a durable engine re-ran it). Each resume is
    a new run with a new ``run_id``; the conversation and the tool call's id are the same, and
    so is the key: one charge, and the second resume is told the first's result.
    Catches: a key from ``run_id`` (two charges: the resumes are two runs), or from the
    arguments the model writes."""
    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from runonce.integrations.pydantic_ai import runonce_toolset
    from runonce.sdk.client import ActionClient

    vendors, _, _ = stack
    amount = 73_000 + int(uuid.uuid4().int % 1000)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(str(returned[-1].content))])
        return ModelResponse(parts=[ToolCallPart("charge_payment", {"card": "tok_visa", "amount_cents": amount,
                                                                    "idempotency_key": uuid.uuid4().hex},
                                                 tool_call_id="call_7")])

    with ActionClient(broker.bootstrap_servers(), agent_id="pydantic-ai-agent") as client:
        agent = Agent(FunctionModel(model), toolsets=[runonce_toolset(client, requires_approval=True)],
                      output_type=[str, DeferredToolRequests])
        asked = agent.run_sync("charge the order")
        assert isinstance(asked.output, DeferredToolRequests) and charged(vendors, amount) == 0
        approved = DeferredToolResults(approvals={call.tool_call_id: True for call in asked.output.approvals})
        first = agent.run_sync(message_history=asked.all_messages(), deferred_tool_results=approved)
        again = agent.run_sync(message_history=asked.all_messages(), deferred_tool_results=approved)
    assert first.run_id != again.run_id  # two runs ...
    assert charged(vendors, amount) == 1  # ... one charge
    assert str(first.output).startswith("Done") and str(again.output).startswith("Not performed again"), again.output


def test_the_callers_trace_context_rides_every_record_of_its_action_from_each_way_in(
        broker: Settings, gateway: Gateway, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """The SDK's (given, or the current OpenTelemetry context), the HTTP API's ``traceparent``
    header and an MCP call's ``_meta.traceparent``: each reaches the request, the stream job's
    decision and the executor's result, on the real broker, worker and executor.
    Catches: the executor's result written without the approved record's context; a way in
    that does not pass its caller's context on (its case has no header)."""
    from runonce.kafka import topics
    from runonce.kafka.reader import read_all
    from runonce.kafka.record import find_header
    from runonce.sdk.client import ActionClient
    from runonce.wire.codec import Codec

    def context() -> str:
        return f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"

    contexts = {"sdk": context(), "http": context(), "mcp": context()}
    ids: dict[str, str] = {}
    with ActionClient(broker.bootstrap_servers(), agent_id="traced-agent") as client:
        handle = client.submit("charge_payment", {"card": "tok_visa", "amount_cents": 1111},
                               idempotency_key=f"tr-{uuid.uuid4().hex[:8]}", trace={"traceparent": contexts["sdk"]})
        assert handle.result(60).status == "succeeded"
        ids["sdk"] = handle.action_id
    status, _, body = http("POST", f"{gateway.url}/v1/actions/charge_payment?wait=60", gateway.tokens["billing-agent"],
                           {"card": "tok_visa", "amount_cents": 1112},
                           headers={"Idempotency-Key": f"tr-{uuid.uuid4().hex[:8]}", "traceparent": contexts["http"]})
    assert status == 200, body
    ids["http"] = body["action_id"]

    async def over_mcp() -> str:
        async with http_session(gateway.url, gateway.tokens["billing-agent"], "traced", modern=True) as session:
            result = await session.call_tool("charge_payment", {"card": "tok_visa", "amount_cents": 1113,
                                                                "idempotency_key": f"tr-{uuid.uuid4().hex[:8]}"},
                                             read_timeout_seconds=120.0, meta={"traceparent": contexts["mcp"]})
            return str((result.structured_content or {})["action_id"])

    ids["mcp"] = asyncio.run(over_mcp())
    codec = Codec()
    by_action = {action_id: way for way, action_id in ids.items()}
    seen: dict[tuple[str, str], bytes | None] = {}
    for topic, expect in ((topics.APPROVED, "ActionDecision"), (topics.RESULTS, "ActionResult")):
        for r in read_all(broker.bootstrap_servers(), topic):
            for action_id, way in by_action.items():
                if decodes_to(codec, r.value, expect, action_id):
                    seen[(way, topic)] = find_header(r.headers, "traceparent")
    for way, ctx in contexts.items():
        for topic in (topics.APPROVED, topics.RESULTS):
            assert seen.get((way, topic)) == ctx.encode(), (way, topic, seen)


def test_a_crewai_task_retried_by_its_guardrail_charges_once_where_the_models_key_charges_twice(
        broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """crewAI #5802 in CrewAI's own process, in a venv of its own (tests/crewai/crew_retry.py:
    a scripted model, a guardrail that refuses the first output, so CrewAI runs the task and
    its charge again). With runonce's tools the retry's charge is a repeat; with the model's
    own key, new on each attempt, it is a second charge: the fault is real.
    Catches: a key that takes the task's ``retry_count`` (the retry's place differs), or the
    model's arguments; a rank that does not restart on a retry."""
    vendors, _, env = stack
    python = Path(__file__).parents[2] / ".venv-crewai" / "bin" / "python"
    assert python.exists(), f"{python}: no venv with CrewAI; run scripts/setup.sh"
    script = Path(__file__).parents[1] / "crewai" / "crew_retry.py"
    amounts = {mode: 61_000 + int(uuid.uuid4().int % 1000) + (500 if mode == "model" else 0)
               for mode in ("derived", "model")}
    answers = {}
    for mode, amount in amounts.items():
        run = subprocess.run([str(python), str(script), mode, str(amount)], env=env, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        answers[mode] = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert [a["attempts"] for a in answers["derived"]] == [2, 2], answers  # the guardrail did make CrewAI retry
    first, retry = (a["answer"] for a in answers["derived"])
    assert first.startswith("Done") and retry.startswith("Not performed again"), answers
    assert charged(vendors, amounts["derived"]) == 1
    assert charged(vendors, amounts["model"]) == 2  # without runonce's place: the retry charged again


def test_a_crewai_crew_resumed_from_its_checkpoint_after_a_crash_charges_its_task_once(
        broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]], tmp_path: Path) -> None:
    """A crew's process dies in its second task, right after that task's charge; the crew is
    restored from its newest checkpoint (the first task's: CrewAI's ``Crew.from_checkpoint``) in
    a new process, which runs the second task again, and its charge (tests/crewai/crew_resume.py).
    A resumed kickoff emits no started event: its id is the one restored with the checkpoint
    (``Crew.checkpoint_kickoff_event_id``), and the keys are derived from it, so the charge
    run again is a repeat, answered with the first's result. The first task is not run again.
    Catches: keys of a resumed crew derived from anything but the restored kickoff id (a new
    key: the card charged twice)."""
    vendors, _, env = stack
    python = Path(__file__).parents[2] / ".venv-crewai" / "bin" / "python"
    assert python.exists(), f"{python}: no venv with CrewAI; run scripts/setup.sh"
    script = Path(__file__).parents[1] / "crewai" / "crew_resume.py"
    amount = 64_000 + 2 * int(uuid.uuid4().int % 1000)
    answers = {}
    for mode, code in (("first", 3), ("resume", 0)):
        run = subprocess.run([str(python), str(script), mode, str(amount), str(tmp_path / "checkpoints")], env=env,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == code, (mode, run.returncode, run.stderr[-3000:])
        answers[mode] = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert [(a["params"]["amount_cents"], a["answer"][:4]) for a in answers["first"]] == [
        (amount, "Done"), (amount + 1, "Done")], answers
    (resumed,) = answers["resume"]  # the second task only: the first completed before the crash
    assert resumed["params"]["amount_cents"] == amount + 1, resumed
    assert resumed["answer"].startswith("Not performed again"), resumed
    assert charged(vendors, amount) == 1 and charged(vendors, amount + 1) == 1


def test_an_agent_that_traces_sees_its_submit_as_a_child_of_its_own_span_and_the_record_carries_it(
        broker: Settings, stack: tuple[VendorServer, SmtpServer, dict[str, str]]) -> None:
    """An agent application with its own OpenTelemetry provider (here with the SDK's in-memory
    exporter): inside its span ``agent turn``, a submit is a PRODUCER span ``send
    actions.requested``, its child, and the request record (so the decision and the result
    after it) carries the submit span's context, on the real broker.
    Catches: the SDK publishing the agent's own context instead of its submit span's (the
    decision would hang off the agent's span, skipping the submit); no span at all."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from runonce.kafka import topics
    from runonce.kafka.reader import read_all
    from runonce.kafka.record import find_header
    from runonce.sdk.client import ActionClient
    from runonce.telemetry.otel import OtelSpans
    from runonce.wire.codec import Codec

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with ActionClient(broker.bootstrap_servers(), agent_id="tracing-agent", spans=OtelSpans(provider)) as client:
        with provider.get_tracer("agent").start_as_current_span("agent turn") as turn:
            handle = client.submit("charge_payment", {"card": "tok_visa", "amount_cents": 1114},
                                   idempotency_key=f"ts-{uuid.uuid4().hex[:8]}")
        assert handle.result(60).status == "succeeded"
    provider.shutdown()
    submit = next(s for s in exporter.get_finished_spans() if s.name == f"send {topics.REQUESTED}")
    assert submit.kind is SpanKind.PRODUCER and submit.parent is not None
    assert submit.parent.span_id == turn.get_span_context().span_id
    codec = Codec()
    carried = [find_header(r.headers, "traceparent") for r in read_all(broker.bootstrap_servers(), topics.REQUESTED)
               if decodes_to(codec, r.value, "ActionRequested", handle.action_id)]
    assert [c.decode().split("-")[1:3] if c else None for c in carried] == [
        [f"{submit.context.trace_id:032x}", f"{submit.context.span_id:016x}"]]
