"""What an executor does with each approved record of a batch, decided before anything is
performed, from what it knows (the result index and the outcomes whose commit aborted).

A batch ends before a record whose action id or vendor key is already in it: two actions
with one vendor key are never in flight together, and the second is planned against the
first's committed result in the next batch, as when they came one at a time."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import AbstractSet, Any, Mapping, Protocol

from runonce.connectors.toolkit.base import ActionCall
from runonce.errors import InvalidInput
from runonce.kafka.record import Record
from runonce.wire.results import Result, Status


class ResultLookups(Protocol):
    """What planning a record asks of the results index (results.py keeps it in RocksDB; the replay
    kit, connectors/testing.py, answers it from plain dicts, so it needs no RocksDB)."""

    def result(self, action_id: str) -> Result | None: ...

    def first_user(self, vendor_key: str) -> str | None: ...


class Plan(enum.Enum):
    #: another vendor's tool: only its offset moves
    SKIP = "skip"
    #: not an ActionDecision (a foreign writer's): dead-lettered with the batch's results
    DEAD_LETTER = "dead_letter"
    #: a final result exists already (a redelivery): nothing to do
    DONE = "already_done"
    #: performed, only its result commit aborted: commit that outcome, call no one
    RECOMMIT = "recommitted"
    #: another action already used its vendor key: never performed (second line of defence)
    BLOCKED = "blocked_duplicate"
    #: an intent without a result (a crash after it): reconciled by the connector's capability
    RECONCILE = "reconcile"
    #: new: an intent is committed, then the vendor is called
    PERFORM = "perform"


@dataclass(frozen=True, slots=True)
class Work:
    record: Record
    plan: Plan
    call: ActionCall | None = None
    request: Mapping[str, Any] | None = None
    #: the intent found (RECONCILE) or the outcome already known (RECOMMIT, BLOCKED)
    prior: Result | None = None
    error: InvalidInput | None = None

    @property
    def tp(self) -> tuple[str, int]:
        return self.record.topic, self.record.partition


@dataclass(frozen=True, slots=True)
class Memory:
    """What an executor remembers of earlier actions when it plans one: committed results by
    action id and the action that first used each vendor key (the index), outcomes whose result
    commit aborted, and the actions whose intent this process committed and whose call never
    started (for when their withdrawal did not commit either)."""

    committed: ResultLookups
    uncommitted: Mapping[str, Result]
    unstarted: AbstractSet[str] = frozenset()


def plan_call(call: ActionCall, memory: Memory) -> tuple[Plan, Result | None]:
    """What to do with one approved action of this executor's tools, and the result it rests on."""
    prior = memory.committed.result(call.action_id)
    first_user = memory.committed.first_user(call.vendor_key)
    recommit = memory.uncommitted.get(call.action_id)
    if recommit is not None and (prior is None or not prior.status.final):
        return Plan.RECOMMIT, recommit
    if prior is None and first_user is not None and first_user != call.action_id:
        # the first user's result is kept at least as long as its claim on the key: none is a broken index
        original = memory.committed.result(first_user) or Result(Status.IN_DOUBT)
        status = original.status if original.status.final else Status.IN_DOUBT  # never race the original
        return Plan.BLOCKED, Result(status, original.vendor_ref, f"not executed: duplicate of action {first_user}", 0)
    if prior is not None and prior.status.final:
        return Plan.DONE, None
    if prior is not None and (prior.withdrawn or call.action_id in memory.unstarted):
        return Plan.PERFORM, None  # its executor knows no call started: nothing to reconcile
    if prior is not None:
        return Plan.RECONCILE, prior
    return Plan.PERFORM, None


def skip(record: Record) -> Work:
    """Another vendor's tool: only its offset moves."""
    return Work(record, Plan.SKIP)


def dead_letter(record: Record, error: InvalidInput) -> Work:
    return Work(record, Plan.DEAD_LETTER, error=error)


def plan_work(record: Record, call: ActionCall, request: Mapping[str, Any], memory: Memory) -> Work:
    plan, result = plan_call(call, memory)
    return Work(record, plan, call, request, result)


def collides(work: Work, action_ids: set[str], vendor_keys: set[str]) -> bool:
    """Whether ``work`` must wait for the next batch (its action or vendor key is in this one)."""
    return work.call is not None and (work.call.action_id in action_ids or work.call.vendor_key in vendor_keys)
