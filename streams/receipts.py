"""A decision's receipt (runonce/receipts): what the stream job certifies for each decision
it writes, by hashes, as its canonical bytes. Runtime-neutral; the transactional runtime chains
and signs them in the transaction that writes the decisions (runonce/kafka/receipts.py)."""

from __future__ import annotations

from runonce.core.tenant import DEFAULT_TENANT
from runonce.kafka import topics
from runonce.kafka.record import Out, find_header
from runonce.receipts.canonical import MAX_INT, NotCanonical, sha256_hex
from runonce.receipts.receipt import Kind, quoted, template
from runonce.wire.headers import H_POLICIES
from runonce.wire.trace import TRACEPARENT

#: the topics whose records are decisions an agent, an executor or an analyst acts on
CERTIFIED = (topics.APPROVED, topics.DROPPED, topics.HELD)


def chain_of(partition: int) -> str:
    """The chain of the decisions of input partition ``partition``."""
    return f"decisions/{partition}"


#: a decision receipt's canonical bytes, its fixed fields written in (runonce/receipts/receipt.py)
_DECISION = template({"kind": Kind.DECISION.value, "answer_sha256": None, "vendor_ref": None})


def decision_bytes(out: Out, chain: str, seq: int, prev: str) -> bytes | None:
    """The canonical bytes of the receipt of ``out`` at ``seq`` on ``chain`` after ``prev``
    (an ``Encode``: runonce/kafka/receipts.py), or None for what is not a decision (a hand-off,
    a re-key, a dead letter, a state change). One formatting a decision, no ``Receipt`` made:
    the worker writes one per decision (tests/unit/test_worker_receipts.py holds them to
    ``Receipt.to_bytes``)."""
    record = out.decision
    if record is None or out.topic not in CERTIFIED or out.value is None:
        return None
    request = record["request"]
    policy = find_header(out.headers, H_POLICIES)
    traceparent = find_header(out.headers, TRACEPARENT)
    approver = record.get("verdict_by")
    at_ms = int(record["event_time_ms"])
    if not -MAX_INT <= at_ms <= MAX_INT:
        raise NotCanonical(f"at_ms: {at_ms} is past 2**53")
    fields = {
        "action_id": quoted(str(request["action_id"])), "agent_id": quoted(str(request["agent_id"])),
        "approver": "null" if approver is None else quoted(str(approver)), "at_ms": at_ms, "chain": quoted(chain),
        "outcome": quoted(str(record["outcome"])),
        "params_sha256": f'"{sha256_hex(str(request["params_json"]).encode("utf-8"))}"',
        "policy": quoted(policy.decode("ascii", "replace") if policy is not None else ""), "prev": quoted(prev),
        "reason": quoted(str(record["reason"])), "record_sha256": f'"{sha256_hex(out.value)}"', "seq": seq,
        "tenant": quoted(str(request.get("tenant") or DEFAULT_TENANT)), "tool": quoted(str(request["tool"])),
        "trace_id": "null" if traceparent is None else quoted(traceparent.decode("ascii", "replace").split("-")[1])}
    try:
        return (_DECISION % fields).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotCanonical(f"a string with no UTF-8 form: {exc.reason}") from None
