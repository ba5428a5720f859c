"""An executor's outcome receipts (connectors/executor/receipts.py): each final result committed
with its receipt on its partition's chain, in the result's own transaction, carrying its proof;
an intent certifies nothing; a chain moves on only when its transaction commits, and a given
partition's chain is read where it stands."""

from __future__ import annotations

import json
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runonce.connectors.executor.receipts import chain_name
from runonce.kafka import topics
from runonce.kafka.receipts import Receipts
from runonce.receipts.canonical import sha256_hex
from runonce.receipts.chain import Head
from runonce.receipts.receipt import Kind, Receipt
from runonce.receipts.signing import Checkpoint, Signer
from runonce.receipts.verify import Proof, Verdict, verify
from runonce.wire.codec import Codec
from runonce.wire.headers import H_RECEIPT
from tests.support.executor_fakes import FakeCheckpoint, FakeConsumer, KnownHeads, Msg, approved, executor, tp

SIGNER = Signer(Ed25519PrivateKey.generate())
KEYS = {SIGNER.key_id: SIGNER.public}


def _receipts() -> Receipts:
    return Receipts(SIGNER)


def _segments(records: list[Any]) -> tuple[list[Receipt], list[Checkpoint]]:
    receipts, checkpoints = [], []
    for r in records:
        if r.topic == topics.RECEIPTS:
            *lines, last = r.value.split(b"\n")
            receipts += [Receipt.from_json(json.loads(line)) for line in lines]
            checkpoints.append(Checkpoint(**json.loads(last)))
    return receipts, checkpoints


def _results(records: list[Any]) -> list[Any]:
    return [r for r in records if r.topic == topics.RESULTS]


def test_each_final_result_is_committed_with_its_receipt_and_carries_a_proof_that_stands_alone() -> None:
    consumer = FakeConsumer([tp(0, 3), tp(1, 7)])
    checkpoint = FakeCheckpoint()
    ex = executor(consumer, checkpoint, receipts=_receipts(), heads=KnownHeads())
    ex.on_assign(consumer, [tp(0), tp(1)])
    consumer.messages = [Msg(0, 3, approved("a1")), Msg(1, 7, approved("a2")), Msg(0, 4, approved("a3"))]
    ex.step()
    (intents, _), (written, _) = checkpoint.commits
    assert _segments(intents) == ([], [])  # an intent certifies nothing
    receipts, checkpoints = _segments(written)
    assert [(r.chain, r.seq, r.action_id, r.kind) for r in receipts] == [
        ("outcomes/mailer/0", 0, "a1", Kind.OUTCOME), ("outcomes/mailer/0", 1, "a3", Kind.OUTCOME),
        ("outcomes/mailer/1", 0, "a2", Kind.OUTCOME)]
    assert [v.verdict for v in verify(receipts, checkpoints, KEYS)] == [Verdict.VERIFIED] * 2
    results = _results(written)
    assert len(results) == 3
    codec = Codec()
    for result in results:
        proof = Proof.from_json(json.loads(dict(result.headers)[H_RECEIPT]))
        assert proof.problem(KEYS) is None
        assert proof.receipt.record_sha256 == sha256_hex(result.value)
        fields = codec.decode(result.value, expect="ActionResult")[1]
        assert (proof.receipt.action_id, proof.receipt.outcome, proof.receipt.vendor_ref) == (
            fields["action_id"], fields["status"], fields["vendor_ref"])
        assert proof.receipt.chain == chain_name("mailer", result.partition)


def test_an_aborted_result_commit_leaves_the_chain_where_it_stood() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint(answers=[True, False])  # the intent commits, the result aborts
    ex = executor(consumer, checkpoint, receipts=_receipts(), heads=KnownHeads())
    ex.on_assign(consumer, [tp(0)])
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    consumer.messages = [Msg(0, 3, approved("a1"))]  # redelivered: the seen outcome commits
    ex.step()
    aborted, _ = _segments(checkpoint.commits[1][0])
    committed, checkpoints = _segments(checkpoint.commits[-1][0])
    assert [(r.seq, r.prev) for r in aborted] == [(r.seq, r.prev) for r in committed] == [(0, "")]
    consumer.messages = [Msg(0, 4, approved("a2"))]
    ex.step()
    after, more = _segments(checkpoint.commits[-1][0])
    assert [(r.seq, r.prev) for r in after] == [(1, committed[0].digest())]
    assert [v.verdict for v in verify(committed + after, checkpoints + more, KEYS)] == [Verdict.VERIFIED]


def test_a_partition_given_goes_on_from_where_its_chain_stands_and_is_read_again_when_given_back() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    heads = KnownHeads({0: Head(chain_name("mailer", 0), 41, "ab" * 32)})
    ex = executor(consumer, checkpoint, receipts=_receipts(), heads=heads)
    ex.on_assign(consumer, [tp(0)])
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    (placed,), _ = _segments(checkpoint.commits[-1][0])
    assert (placed.seq, placed.prev) == (41, "ab" * 32)
    ex.on_revoke(consumer, [tp(0)])
    heads.heads[0] = Head(chain_name("mailer", 0), 90, "cd" * 32)  # another owner moved it meanwhile
    ex.on_assign(consumer, [tp(0)])
    consumer.messages = [Msg(0, 4, approved("a2"))]
    ex.step()
    (placed,), _ = _segments(checkpoint.commits[-1][0])
    assert (placed.seq, placed.prev) == (90, "cd" * 32) and heads.read == [0, 0]


def test_without_a_key_results_carry_no_receipt() -> None:
    consumer = FakeConsumer([tp(0, 3)])
    checkpoint = FakeCheckpoint()
    ex = executor(consumer, checkpoint)
    ex.on_assign(consumer, [tp(0)])
    consumer.messages = [Msg(0, 3, approved("a1"))]
    ex.step()
    written, _ = checkpoint.commits[-1]
    assert [r.topic for r in written] == [topics.RESULTS] and H_RECEIPT not in dict(written[0].headers)
