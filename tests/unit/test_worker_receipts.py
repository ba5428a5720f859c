"""The worker's receipts (runonce/kafka/receipts.py, streams/receipts.py) over a transaction's life: a
receipt behind each decision, a signed checkpoint per chain at its end, and a chain that moves
on only when the transaction commits."""

from __future__ import annotations

import json
from functools import partial

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runonce.kafka import topics
from runonce.kafka.receipts import SEGMENT_RECEIPTS, Receipts
from runonce.kafka.record import Out
from runonce.receipts.chain import Head
from runonce.receipts.receipt import Receipt
from runonce.receipts.signing import Checkpoint, Signer
from runonce.receipts.verify import Verdict, verify
from runonce.sdk.submit import build_request
from runonce.streams.receipts import chain_of, decision_receipt
from runonce.wire.headers import H_POLICIES, H_RECEIPT_TYPE

SIGNER = Signer(Ed25519PrivateKey.generate())


def _decision(i: int, topic: str = topics.APPROVED) -> Out:
    request = build_request("charge_payment", {"amount_cents": i}, agent_id="billing", idempotency_key=f"k-{i}")
    record = {"request": request, "outcome": "APPROVED", "reason": "unique", "event_time_ms": 1_000 + i}
    return Out(topic, b"k", b"decision %d" % i, headers=((H_POLICIES, b"digest"),), decision=record)


def _note(r: Receipts, partition: int, outs: list[Out]) -> None:
    for out in outs:
        r.add(partition, partial(decision_receipt, out))


def _written(outs: list[Out]) -> tuple[list[Receipt], list[Checkpoint]]:
    receipts, checkpoints = [], []
    for out in outs:
        assert out.topic == topics.RECEIPTS and dict(out.headers)[H_RECEIPT_TYPE] == b"segment"
        *lines, last = (out.value or b"").split(b"\n")
        receipts += [Receipt.from_json(json.loads(line)) for line in lines]
        checkpoints.append(Checkpoint(**json.loads(last)))
    return receipts, checkpoints


def test_each_decision_gets_a_receipt_behind_it_and_each_chain_a_checkpoint() -> None:
    r = Receipts(SIGNER, chain_of)
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
    r = Receipts(SIGNER, chain_of)
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
    r = Receipts(SIGNER, chain_of)
    r.own(0, Head(chain_of(0)))
    _note(r, 0, [Out(topics.DLQ, None, b"bad")])
    assert r.segments(1) == []


def test_a_long_transactions_receipts_are_cut_into_segments_that_each_verify() -> None:
    r = Receipts(SIGNER, chain_of)
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
