"""A decision's receipt (runonce/receipts): what the stream job certifies for each decision
it writes, by hashes. Runtime-neutral; the transactional runtime chains and signs them in the
transaction that writes the decisions (runonce/kafka/receipts.py)."""

from __future__ import annotations

from runonce.core.tenant import DEFAULT_TENANT
from runonce.kafka import topics
from runonce.kafka.record import Out, find_header
from runonce.receipts.canonical import sha256_hex
from runonce.receipts.chain import Head
from runonce.receipts.receipt import Kind, Receipt
from runonce.wire.headers import H_POLICIES
from runonce.wire.trace import TRACEPARENT

#: the topics whose records are decisions an agent, an executor or an analyst acts on
CERTIFIED = (topics.APPROVED, topics.DROPPED, topics.HELD)


def chain_of(partition: int) -> str:
    """The chain of the decisions of input partition ``partition``."""
    return f"decisions/{partition}"


def decision_receipt(out: Out, head: Head) -> Receipt | None:
    """The receipt of ``out``, placed where ``head`` stands, or None for what is not a
    decision (a hand-off, a re-key, a dead letter, a state change)."""
    record = out.decision
    if record is None or out.topic not in CERTIFIED or out.value is None:
        return None
    request = record["request"]
    policy = find_header(out.headers, H_POLICIES)
    traceparent = find_header(out.headers, TRACEPARENT)
    return Receipt(
        chain=head.chain, seq=head.next_seq, prev=head.last_digest, kind=Kind.DECISION,
        action_id=str(request["action_id"]), tenant=str(request.get("tenant") or DEFAULT_TENANT),
        agent_id=str(request["agent_id"]), tool=str(request["tool"]),
        params_sha256=sha256_hex(str(request["params_json"]).encode("utf-8")),
        policy=policy.decode("ascii", "replace") if policy is not None else "",
        outcome=str(record["outcome"]), reason=str(record["reason"]), record_sha256=sha256_hex(out.value),
        at_ms=int(record["event_time_ms"]), approver=record.get("verdict_by"),
        trace_id=traceparent.decode("ascii", "replace").split("-")[1] if traceparent is not None else None)
