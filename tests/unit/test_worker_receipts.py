"""The worker's receipts (runonce/kafka/receipts.py, streams/receipts.py) over a transaction's life: a
receipt behind each decision, a signed checkpoint per chain at its end, and a chain that moves
on only when the transaction commits."""

from __future__ import annotations

import json

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from runonce.kafka import topics
from runonce.kafka.receipts import SEGMENT_RECEIPTS, Receipts
from runonce.kafka.record import Out
from runonce.receipts.canonical import sha256_hex
from runonce.receipts.chain import Head
from runonce.receipts.receipt import Kind, Receipt
from runonce.receipts.signing import Checkpoint, Signer
from runonce.receipts.verify import Verdict, verify
from runonce.sdk.submit import build_request
from runonce.streams.receipts import chain_of, decision_bytes
from runonce.wire.headers import H_POLICIES, H_RECEIPT_TYPE
from runonce.wire.trace import TRACEPARENT

SIGNER = Signer(Ed25519PrivateKey.generate())


def _decision(i: int, topic: str = topics.APPROVED) -> Out:
    request = build_request("charge_payment", {"amount_cents": i}, agent_id="billing", idempotency_key=f"k-{i}")
    record = {"request": request, "outcome": "APPROVED", "reason": "unique", "event_time_ms": 1_000 + i}
    return Out(topic, b"k", b"decision %d" % i, headers=((H_POLICIES, b"digest"),), decision=record)


def _note(r: Receipts, partition: int, outs: list[Out]) -> None:
    for out in outs:
        r.add(partition, decision_bytes, out)


def _written(outs: list[Out]) -> tuple[list[Receipt], list[Checkpoint]]:
    receipts, checkpoints = [], []
    for out in outs:
        assert out.topic == topics.RECEIPTS and dict(out.headers)[H_RECEIPT_TYPE] == b"segment"
        *lines, last = (out.value or b"").split(b"\n")
        receipts += [Receipt.from_json(json.loads(line)) for line in lines]
        checkpoints.append(Checkpoint(**json.loads(last)))
    return receipts, checkpoints


def test_each_decision_gets_a_receipt_behind_it_and_each_chain_a_checkpoint() -> None:
    r = Receipts(SIGNER)
    r.own(0, Head(chain_of(0)))
    r.own(1, Head(chain_of(1)))
    handoff = Out(topics.SCOPED, b"s", b"pass")  # not a decision: no receipt
    decided = [_decision(1), _decision(2, topics.DROPPED), _decision(3)]
    _note(r, 0, [decided[0], handoff])
    _note(r, 1, [decided[1]])
    _note(r, 0, [decided[2]])
    segments = r.segments(signed_at_ms=5_000)
    assert [o.partition for o in segments] == [0, 1]  # a record a chain, on its partition
    receipts, checkpoints = _written(segments)
    ids = [d.decision["request"]["action_id"] for d in decided]  # type: ignore[index]
    assert [(x.chain, x.seq, x.action_id) for x in receipts] == [
        ("decisions/0", 0, ids[0]), ("decisions/0", 1, ids[2]), ("decisions/1", 0, ids[1])]
    assert [(c.chain, c.first_seq, c.last_seq) for c in checkpoints] == [("decisions/0", 0, 1), ("decisions/1", 0, 0)]
    assert all(v.verdict is Verdict.VERIFIED for v in verify(receipts, checkpoints, {SIGNER.key_id: SIGNER.public}))


def test_a_chain_moves_on_only_when_its_transaction_commits() -> None:
    r = Receipts(SIGNER)
    r.own(0, Head(chain_of(0)))
    _note(r, 0, [_decision(1)])
    first = r.segments(1)
    r.committed_now()
    _note(r, 0, [_decision(2)])
    r.aborted()  # that transaction never was
    _note(r, 0, [_decision(3)])
    again = r.segments(2)
    r.committed_now()
    receipts, checkpoints = (a + b for a, b in zip(_written(first), _written(again)))
    assert [x.seq for x in receipts] == [0, 1]
    assert all(v.verdict is Verdict.VERIFIED for v in verify(receipts, checkpoints, {SIGNER.key_id: SIGNER.public}))
    assert r.committed[0].next_seq == 2


def test_a_transaction_with_no_decision_signs_nothing() -> None:
    r = Receipts(SIGNER)
    r.own(0, Head(chain_of(0)))
    _note(r, 0, [Out(topics.DLQ, None, b"bad")])
    assert r.segments(1) == []


def test_a_long_transactions_receipts_are_cut_into_segments_that_each_verify() -> None:
    r = Receipts(SIGNER)
    r.own(0, Head(chain_of(0)))
    for i in range(SEGMENT_RECEIPTS * 2 + 3):
        _note(r, 0, [_decision(i)])
    segments = r.segments(1)
    receipts, checkpoints = _written(segments)
    assert [(c.first_seq, c.last_seq) for c in checkpoints] == [
        (0, SEGMENT_RECEIPTS - 1), (SEGMENT_RECEIPTS, 2 * SEGMENT_RECEIPTS - 1),
        (2 * SEGMENT_RECEIPTS, 2 * SEGMENT_RECEIPTS + 2)]
    assert max(len(o.value or b"") for o in segments) < 1024 * 1024
    assert all(v.verdict is Verdict.VERIFIED for v in verify(receipts, checkpoints, {SIGNER.key_id: SIGNER.public}))


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # any string with a UTF-8 form


@given(action_id=_TEXT, agent_id=_TEXT, tenant=_TEXT, tool=_TEXT, params=_TEXT, reason=_TEXT,
       approver=st.none() | _TEXT, policy=st.none() | st.binary(max_size=12), traced=st.booleans(),
       at_ms=st.integers(-2**53, 2**53), seq=st.integers(0, 2**40), prev=st.sampled_from(["", "ab" * 32]),
       topic=st.sampled_from([topics.APPROVED, topics.DROPPED, topics.HELD]))
def test_a_decisions_bytes_are_its_receipts_canonical_bytes(
        action_id: str, agent_id: str, tenant: str, tool: str, params: str, reason: str, approver: str | None,
        policy: bytes | None, traced: bool, at_ms: int, seq: int, prev: str, topic: str) -> None:
    """The worker's one formatting a decision (streams/receipts.py) writes what ``Receipt``
    declares: the same bytes as the receipt built field by field and written by ``to_bytes``."""
    request = {"action_id": action_id, "agent_id": agent_id, "tenant": tenant, "tool": tool, "params_json": params}
    record = {"request": request, "outcome": "APPROVED", "reason": reason, "event_time_ms": at_ms,
              "verdict_by": approver}
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    headers = ((H_POLICIES, policy),) if policy is not None else ()
    headers += ((TRACEPARENT, f"00-{trace_id}-b7ad6b7169203331-01".encode()),) if traced else ()
    out = Out(topic, b"k", b"the decision record", headers=headers, decision=record)
    expected = Receipt(
        chain="decisions/3", seq=seq, prev=prev, kind=Kind.DECISION, action_id=action_id, tenant=tenant or "default",
        agent_id=agent_id, tool=tool, params_sha256=sha256_hex(params.encode()),
        policy=policy.decode("ascii", "replace") if policy is not None else "", outcome="APPROVED", reason=reason,
        record_sha256=sha256_hex(b"the decision record"), at_ms=at_ms, approver=approver,
        trace_id=trace_id if traced else None)
    assert decision_bytes(out, "decisions/3", seq, prev) == expected.to_bytes()


def test_what_is_not_a_decision_has_no_receipt() -> None:
    assert decision_bytes(Out(topics.SCOPED, b"s", b"pass"), "decisions/0", 0, "") is None
    assert decision_bytes(Out(topics.DLQ, None, b"bad"), "decisions/0", 0, "") is None
