"""A held action as an MCP task (the ``io.modelcontextprotocol/tasks`` extension of the
2026-07-28 revision): instead of a text that says "waiting for approval", a client that
declares the extension on its call gets a task in ``working`` and polls ``tasks/get`` until
the approver's verdict and the vendor's answer make it ``completed`` (the action's result) or
``failed`` (denied, or expired, with the reason).

The task is the action: its id names the action and its place in ``actions.requested``, so
any gateway replica, or one restarted since, answers a poll by reading Kafka
(``ActionClient.look_up``); nothing lives in one process's memory. A call whose outcome is
not known within the gateway's wait becomes a task the same way. A client without the
extension, or on a revision before 2026-07-28 (whose wire has no ``resultType``), keeps the
plain result.

``failed`` is for a denial or an expiry only: the action was never performed, and the error
says why (code ``NOT_PERFORMED_CODE``). A vendor's refusal or an in-doubt outcome is ``completed``
with ``isError``, as the extension's spec asks of a tool's own errors.

``tasks/cancel`` on a task waiting for a person asks the stream job to deny its action as
cancelled by its agent (an agent's cancel, core/approval.py): acknowledged once written, and
``cancelled`` when decided, unless a person's release came first (the task then completes, as
the extension's cooperative cancel allows). A task not waiting for a person cannot be cancelled:
runonce never stops a vendor's call midway, and a finished task is final."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Mapping

from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from runonce.core.decision import Reason
from runonce.gateway.mcp_answers import call_tool_result
from runonce.sdk.client import ActionOutcome, HeldFor
from runonce.tools.answers import answer
from runonce.wire.results import CallStatus

EXTENSION = "io.modelcontextprotocol/tasks"
#: what a client is told to wait between polls: a person's verdict takes minutes
POLL_INTERVAL_MS = 2000
#: the JSON-RPC error of a task whose action was not performed (denied, or expired unapproved)
NOT_PERFORMED_CODE = -32000
_NOT_PERFORMED_REASONS = {Reason.APPROVAL_DENIED.value: "denied by an approver",
                          Reason.APPROVAL_EXPIRED.value: "no one approved it before its approval expired"}

_TASK_ID = re.compile(r"^(?P<action>[0-9a-f-]{36})\.(?P<partition>\d+)\.(?P<offset>\d+)$")


@dataclass(frozen=True, slots=True)
class TaskId:
    """An action and its place in actions.requested: all a replica needs to find it again."""

    action_id: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.action_id}.{self.partition}.{self.offset}"

    @classmethod
    def parse(cls, text: str) -> TaskId | None:
        m = _TASK_ID.match(text)
        return cls(m["action"], int(m["partition"]), int(m["offset"])) if m else None

    @property
    def requested_at(self) -> tuple[int, int]:
        return self.partition, self.offset


def declared(protocol_version: str, meta: Mapping[str, Any] | None) -> bool:
    """Whether this request's client takes a task for an answer: it declares the extension in
    the request's own capabilities, on a revision whose results carry ``resultType``."""
    if protocol_version not in MODERN_PROTOCOL_VERSIONS or not meta:
        return False
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def created(task: TaskId, held: HeldFor | None, now_ms: int) -> dict[str, Any]:
    """The ``CreateTaskResult`` of a call held for a person, or not performed yet."""
    return {"resultType": "task", **_task(task, _working(held), now_ms, now_ms)}


def polled(task: TaskId, tool: str, outcome: ActionOutcome | None, held: HeldFor | None,
           created_ms: int, now_ms: int) -> dict[str, Any]:
    """The ``GetTaskResult`` for an action in this state."""
    if outcome is None:
        return _task(task, _working(held), created_ms, now_ms)
    told = answer(tool, outcome)
    if outcome.cancelled:
        return _task(task, ("cancelled", told.text), created_ms, now_ms)
    why = _NOT_PERFORMED_REASONS.get(outcome.drop_reason or "")
    if outcome.status is CallStatus.DROPPED and why is not None:
        return {**_task(task, ("failed", f"Not performed: {why}."), created_ms, now_ms),
                "error": {"code": NOT_PERFORMED_CODE, "message": f"action {task.action_id} was not performed: {why}",
                          "data": told.facts}}
    return {**_task(task, ("completed", told.text), created_ms, now_ms), "result": call_tool_result(told).model_dump(
        mode="json", by_alias=True, exclude_none=True)}


def cancelled() -> dict[str, Any]:
    """The ``CancelTaskResult``: an acknowledgement, the cancel written (not yet decided)."""
    return {"resultType": "complete"}


def not_cancellable(task: TaskId, outcome: ActionOutcome | None) -> str:
    """Why ``tasks/cancel`` refuses a task: finished, or not waiting for a person."""
    if outcome is not None:
        return f"task {task} has ended ({outcome.status.value}): a finished task cannot be cancelled"
    return (f"task {task} is not waiting for a person: its action is being decided or performed, and runonce "
            "never stops a vendor's call midway; poll tasks/get for its outcome")


def _working(held: HeldFor | None) -> tuple[str, str]:
    if held is None:
        return "working", "Recorded; runonce is deciding or performing it. It will not be performed twice."
    until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(held.expires_at_ms / 1000))
    return "working", f"Waiting for a person's approval ({held.why}) until {until}."


def _task(task: TaskId, status: tuple[str, str], created_ms: int, now_ms: int) -> dict[str, Any]:
    return {"taskId": str(task), "status": status[0], "statusMessage": status[1],
            "createdAt": _iso(created_ms), "lastUpdatedAt": _iso(now_ms),
            "ttlMs": None,  # the action's outcome is kept as long as Kafka keeps its topics
            "pollIntervalMs": POLL_INTERVAL_MS}


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"
