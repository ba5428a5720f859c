"""The MCP tasks extension's shapes (runonce/gateway/tasks.py), without a broker: who gets a
task, what its id holds, and which outcome is which task status. The integration test
(test_ways_in.py) runs the whole path against the broker.

Catches: a task offered on a handshake-era wire (its results have no ``resultType``: the SDK
would fail the call) or to a client that did not declare the extension; a denial or an
expiry reported as ``completed``; a vendor's refusal reported as ``failed`` (the spec keeps
``failed`` for JSON-RPC errors: a tool's own errors complete with ``isError``)."""

from __future__ import annotations

import uuid

import pytest

from runonce.gateway.tasks import EXTENSION, NOT_PERFORMED_CODE, TaskId, created, declared, polled
from runonce.sdk.client import ActionOutcome, HeldFor
from runonce.wire.results import CallStatus

CAPS = "io.modelcontextprotocol/clientCapabilities"
ACTION = str(uuid.uuid4())
TASK = TaskId(ACTION, 3, 1207)


@pytest.mark.parametrize("version, meta, expected", [
    ("2026-07-28", {CAPS: {"extensions": {EXTENSION: {}}}}, True),
    ("2025-11-25", {CAPS: {"extensions": {EXTENSION: {}}}}, False),
    ("2026-07-28", {CAPS: {"extensions": {"io.modelcontextprotocol/ui": {}}}}, False),
    ("2026-07-28", {CAPS: "not an object"}, False),
    ("2026-07-28", None, False),
])
def test_a_task_only_for_a_client_that_declares_the_extension_on_the_2026_wire(
        version: str, meta: dict[str, object] | None, expected: bool) -> None:
    assert declared(version, meta) is expected


def test_a_task_id_names_the_action_and_its_place_and_nothing_else_parses() -> None:
    assert TaskId.parse(str(TASK)) == TASK and TASK.requested_at == (3, 1207)
    for text in (ACTION, f"{ACTION}.3", f"{ACTION}.x.1", f"../{ACTION}.3.1", ""):
        assert TaskId.parse(text) is None, text


def test_a_held_call_is_a_working_task_that_says_what_it_waits_for() -> None:
    made = created(TASK, HeldFor("amount_cents above 1000000", 1_800_000_000_000), 1_700_000_000_000)
    assert made["resultType"] == "task" and made["status"] == "working" and made["taskId"] == str(TASK)
    assert "approval (amount_cents above 1000000)" in made["statusMessage"]
    assert made["createdAt"] == "2023-11-14T22:13:20.000Z" and made["pollIntervalMs"] > 0


@pytest.mark.parametrize("reason", ["approval_denied", "approval_expired"])
def test_an_action_never_performed_fails_its_task_with_the_reason(reason: str) -> None:
    state = polled(TASK, "charge_payment", ActionOutcome(ACTION, CallStatus.DROPPED, ACTION, drop_reason=reason),
                   None, 1, 2)
    assert state["status"] == "failed" and "result" not in state
    assert state["error"]["code"] == NOT_PERFORMED_CODE and "not performed" in state["error"]["message"]


@pytest.mark.parametrize("status, is_error", [(CallStatus.SUCCEEDED, False), (CallStatus.FAILED, True),
                                              (CallStatus.IN_DOUBT, True)])
def test_a_performed_action_completes_its_task_with_the_tools_result(status: CallStatus, is_error: bool) -> None:
    state = polled(TASK, "charge_payment", ActionOutcome(ACTION, status, ACTION, "ch_1", None), None, 1, 2)
    assert state["status"] == "completed" and "error" not in state
    assert state["result"]["isError"] is is_error
    assert state["result"]["structuredContent"]["status"] == status


def test_a_task_of_another_tenant_is_not_found() -> None:
    """``tasks/get`` finds a task's action again from Kafka (``Calls.find``); a caller of
    another tenant who has the task id is answered as for no task at all. Catches the tenant
    comparison dropped from the lookup (another tenant's tool, params' outcome and hold
    readable by anyone who guesses or is given a task id)."""
    import anyio

    from runonce.gateway.calls import Caller, Calls
    from runonce.sdk.client import Found

    outcome = ActionOutcome(ACTION, CallStatus.SUCCEEDED, ACTION, "ch_1")

    class Looking:
        """What Calls.find asks of ActionClient: the action at its place, read from Kafka."""

        def look_up(self, action_id: str, requested_at: tuple[int, int], deadline: float) -> Found | None:
            assert (action_id, requested_at) == (ACTION, (3, 1207))
            return Found("charge_payment", "acme", "billing", 1_700_000_000_000, outcome)

    calls = Calls(Looking())  # type: ignore[arg-type]

    async def find(tenant: str) -> Found | None:
        return await calls.find(Caller("agent", None, tenant), ACTION, (3, 1207), 0.1)

    assert anyio.run(find, "acme") == Found("charge_payment", "acme", "billing", 1_700_000_000_000, outcome)
    assert anyio.run(find, "globex") is None


def test_a_task_its_agent_cancelled_ends_cancelled_and_a_persons_deny_fails_it() -> None:
    """Catches a cancel shown as a person's denial (``failed``), or any denial as cancelled."""
    cancelled = ActionOutcome(ACTION, CallStatus.DROPPED, ACTION, drop_reason="approval_denied",
                              verdict_by="agent:billing")
    state = polled(TASK, "charge_payment", cancelled, None, 1, 2)
    assert state["status"] == "cancelled" and "error" not in state and "result" not in state
    assert "cancelled" in state["statusMessage"]
    denied = ActionOutcome(ACTION, CallStatus.DROPPED, ACTION, drop_reason="approval_denied", verdict_by="carol")
    assert polled(TASK, "charge_payment", denied, None, 1, 2)["status"] == "failed"


@pytest.mark.parametrize("asked_by, tenant, outcome, held, refused", [
    ("billing", "billing", None, True, None),
    ("billing", "globex", None, True, "no task"),
    ("someone-else", "billing", None, True, "asked for by another agent"),
    ("billing", "billing", ActionOutcome(ACTION, CallStatus.SUCCEEDED, ACTION, "ch_1"), True, "has ended (succeeded)"),
    ("billing", "billing", None, False, "not waiting for a person"),
])
def test_tasks_cancel_writes_the_agents_cancel_only_for_its_own_waiting_task(
        asked_by: str, tenant: str, outcome: ActionOutcome | None, held: bool, refused: str | None) -> None:
    """``tasks/cancel`` on the gateway: the agent's cancel is written for a task of its tenant
    that it asked for and that waits for a person; every other case is refused before
    anything is written. Catches the agent check dropped (any agent of a tenant cancelling
    another's held action: the stream job would record it and change nothing, while the
    gateway told the caller it was done), and a finished task's cancel written."""
    import anyio
    from mcp.shared.exceptions import MCPError

    from runonce.core.policy import PolicyBook
    from runonce.gateway import server
    from runonce.gateway.calls import Caller, Calls
    from runonce.sdk.client import Found

    written: list[tuple[str, tuple[int, int], str | None]] = []

    class Client:
        """What the gateway asks of ActionClient to cancel a task."""

        policies = PolicyBook.load()

        def look_up(self, action_id: str, requested_at: tuple[int, int], deadline: float) -> Found | None:
            return Found("charge_payment", tenant, asked_by, 1_700_000_000_000, outcome)

        def cancel(self, action_id: str, requested_at: tuple[int, int], deadline: float, *,
                   agent_id: str | None = None, reason: str = "") -> bool:
            if held:
                written.append((action_id, requested_at, agent_id))
            return held

    gateway = server.create_gateway(Calls(Client()), PolicyBook.load(),  # type: ignore[arg-type]
                                    local=Caller("billing", None, "billing"))
    entry = gateway.get_request_handler("tasks/cancel")
    assert entry is not None

    async def cancel() -> object:
        try:
            return await entry.handler(None, server.TaskParams(task_id=str(TASK)))
        except MCPError as exc:
            return exc

    answer = anyio.run(cancel)
    if refused is None:
        assert answer == {"resultType": "complete"}
        assert written == [(ACTION, (3, 1207), "billing")]
    else:
        assert isinstance(answer, MCPError) and refused in str(answer), answer
        assert written == []
