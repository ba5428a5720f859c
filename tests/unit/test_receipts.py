"""Receipts (runonce/receipts): the Merkle tree as RFC 9162 defines it, and offline
verification that names the first bad record for each way a log can be changed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from runonce.receipts import merkle
from runonce.receipts.canonical import NotCanonical, canonical_bytes
from runonce.receipts.chain import Head
from runonce.receipts.receipt import Kind, Receipt
from runonce.receipts.signing import Checkpoint, Signer
from runonce.receipts.verify import Proof, Verdict, inclusion_of, inclusion_problem, proofs_of, verify


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 2.1.1's definition, recursively, as written."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


@given(st.lists(st.binary(max_size=8), max_size=40))
def test_the_root_is_rfc_9162s_tree_hash(data: list[bytes]) -> None:
    leaves = [merkle.leaf_hash(d) for d in data]
    assert merkle.root(leaves) == _mth(leaves)


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=8), min_size=1, max_size=40), st.data())
def test_every_leaf_is_proven_by_its_audit_path_and_no_other(data: list[bytes], pick: st.DataObject) -> None:
    leaves = [merkle.leaf_hash(d) for d in data]
    index = pick.draw(st.integers(0, len(leaves) - 1))
    path = merkle.inclusion_proof(index, leaves)
    assert merkle.root_from_proof(leaves[index], index, len(leaves), path) == merkle.root(leaves)
    stranger = merkle.leaf_hash(b"not in the tree")
    assert merkle.root_from_proof(stranger, index, len(leaves), path) != merkle.root(leaves)
    if len(leaves) > 1:
        other = (index + 1) % len(leaves)
        assert merkle.root_from_proof(leaves[index], other, len(leaves), path) != merkle.root(leaves) or \
            leaves[other] == leaves[index]


@given(st.lists(st.binary(max_size=8), min_size=1, max_size=70))
def test_every_path_at_once_is_each_leafs_own_audit_path(data: list[bytes]) -> None:
    leaves = [merkle.leaf_hash(d) for d in data]
    assert merkle.inclusion_proofs(leaves) == [merkle.inclusion_proof(i, leaves) for i in range(len(leaves))]


def test_canonical_bytes_are_what_json_writes_sorted_and_compact() -> None:
    fields = {"b": "é\n\"", "a": 2**53, "c": None, "d": True}
    assert canonical_bytes(fields) == json.dumps(fields, sort_keys=True, separators=(",", ":"),
                                                 ensure_ascii=False).encode()
    with pytest.raises(NotCanonical, match="a: 9007199254740993 is past 2"):
        canonical_bytes({"a": 2**53 + 1})
    with pytest.raises(NotCanonical, match="no UTF-8 form"):
        canonical_bytes({"a": "\ud800"})


SIGNER = Signer(Ed25519PrivateKey.generate())
KEYS = {SIGNER.key_id: SIGNER.public}


def _receipt(i: int) -> Receipt:
    return Receipt(chain="", seq=0, prev="", kind=Kind.DECISION, action_id=f"a-{i}", tenant="default",
                   agent_id="billing", tool="charge_payment", params_sha256=hashlib.sha256(b"%d" % i).hexdigest(),
                   policy="7a66813d4963", outcome="APPROVED", reason="unique", record_sha256="00" * 32,
                   at_ms=1_800_000_000_000 + i, trace_id=None)


def _log(n: int, every: int = 4, chain: str = "decisions/0") -> tuple[list[Receipt], list[Checkpoint]]:
    """n receipts on one chain, a checkpoint after each ``every`` (the rest open)."""
    head, receipts, checkpoints = Head(chain), [], []
    for i in range(n):
        receipt, head = head.link(_receipt(i))
        receipts.append(receipt)
        if (i + 1) % every == 0:
            checkpoints.append(SIGNER.checkpoint(receipts[-every:], 1_800_000_000_000 + i))
    return receipts, checkpoints


def _one(receipts: list[Receipt], checkpoints: list[Checkpoint], keys: dict = KEYS):  # type: ignore[type-arg]
    reports = verify(receipts, checkpoints, keys)
    assert len(reports) == 1
    return reports[0]


def test_an_intact_log_is_verified_and_its_unsigned_tail_open() -> None:
    receipts, checkpoints = _log(12)
    report = _one(receipts, checkpoints)
    assert (report.verdict, report.receipts, report.signed_through, report.problem) == (Verdict.VERIFIED, 12, 11, None)
    report = _one(*_log(14))
    assert (report.verdict, report.signed_through) == (Verdict.OPEN, 11)
    # the file's order means nothing: receipts are placed by their seq
    assert _one(receipts[::-1], checkpoints[::-1]).verdict is Verdict.VERIFIED


def test_a_receipts_round_trip_through_its_exported_json() -> None:
    receipts, _ = _log(3)
    assert [Receipt.from_json(json.loads(json.dumps(r.to_json()))) for r in receipts] == receipts
    with pytest.raises(ValueError, match="not a receipt's field: params"):
        Receipt.from_json({**receipts[0].to_json(), "params": "{}"})
    with pytest.raises(ValueError, match="a receipt without action_id"):
        Receipt.from_json({k: v for k, v in receipts[0].to_json().items() if k != "action_id"})
    with pytest.raises(ValueError, match="seq: '1' is not an integer"):
        Receipt.from_json({**receipts[0].to_json(), "seq": "1"})


@pytest.mark.parametrize("seq", [2, 5, 11])
def test_a_byte_changed_in_a_signed_receipt_is_tampered_and_named(seq: int) -> None:
    receipts, checkpoints = _log(12)
    receipts[seq] = replace(receipts[seq], outcome="DROPPED")
    report = _one(receipts, checkpoints)
    assert report.verdict is Verdict.TAMPERED
    # the successor names it; the last one of all is named by its checkpoint's root
    assert (f"decisions/0#{seq} (action a-{seq})" if seq < 11 else "#8..#11: its receipts do not make its root") \
        in str(report.problem)


def test_a_receipt_removed_is_a_gap_named_by_its_place() -> None:
    receipts, checkpoints = _log(12)
    del receipts[6]
    report = _one(receipts, checkpoints)
    assert (report.verdict, report.problem) == (Verdict.GAP, "decisions/0#6 is missing (the chain goes on to #11)")
    assert report.signed_through == 3  # the checkpoint over #4..#7 cannot be checked without it
    receipts, checkpoints = _log(12)
    report = _one(receipts[:-1], checkpoints)  # the signed tail cut
    assert (report.verdict, report.problem) == (Verdict.GAP, "decisions/0#11 is missing (checkpoint signed "
                                                              "through #11)")


def test_two_receipts_swapped_are_tampered() -> None:
    receipts, checkpoints = _log(12)
    a, b = receipts[4], receipts[5]
    receipts[4], receipts[5] = replace(b, seq=4), replace(a, seq=5)
    report = _one(receipts, checkpoints)
    assert report.verdict is Verdict.TAMPERED
    assert report.problem == ("decisions/0#3 (action a-3) is not the receipt decisions/0#4 (action a-5) follows: "
                              "changed, or moved")


def test_a_root_signed_with_another_key_is_tampered() -> None:
    receipts, checkpoints = _log(8)
    intruder = Signer(Ed25519PrivateKey.generate())
    forged = intruder.checkpoint(receipts[4:8], 1)
    report = _one(receipts, [checkpoints[0], forged])
    assert (report.verdict, report.signed_through) == (Verdict.TAMPERED, 3)
    assert report.problem == (f"checkpoint decisions/0#4..#7: signed by key {intruder.key_id}, which is not one of "
                              "the 1 keys given")
    claimed = replace(forged, key_id=SIGNER.key_id)  # the right key's name on another key's signature
    report = _one(receipts, [checkpoints[0], claimed])
    assert report.problem == f"checkpoint decisions/0#4..#7: its signature does not hold for key {SIGNER.key_id}"


def test_a_receipt_for_an_action_that_never_was_cannot_join_a_chain() -> None:
    receipts, checkpoints = _log(8)
    invented, _ = Head("decisions/0", 8, "ab" * 32).link(_receipt(99))  # on the end, with a made-up link
    report = _one([*receipts, invented], checkpoints)
    assert report.verdict is Verdict.TAMPERED and "decisions/0#7 (action a-7)" in str(report.problem)
    inserted = replace(receipts[3], action_id="a-99")  # in place of a signed one
    report = _one([*receipts[:3], inserted, *receipts[4:]], checkpoints)
    assert report.verdict is Verdict.TAMPERED


def test_an_agents_own_receipt_is_proven_against_the_published_key_alone() -> None:
    receipts, checkpoints = _log(12, every=6)
    mine = receipts[8]
    inclusion = inclusion_of(mine, receipts[6:12], checkpoints[1])
    assert inclusion_problem(mine, inclusion, KEYS) is None
    assert "do not make the signed root" in str(inclusion_problem(replace(mine, outcome="DROPPED"), inclusion, KEYS))
    other = Signer(Ed25519PrivateKey.generate())
    assert "not one of the 1 keys given" in str(inclusion_problem(mine, inclusion, {other.key_id: other.public}))
    assert "is not among the receipts" in str(inclusion_problem(receipts[2], inclusion, KEYS))


def test_a_proof_stands_alone_as_a_line_and_fails_when_any_part_of_it_changed() -> None:
    receipts, checkpoints = _log(12, every=6)
    proofs = proofs_of(receipts[6:12], checkpoints[1])
    assert [p.receipt for p in proofs] == receipts[6:12]
    for proof in proofs:
        line = json.dumps(proof.to_json(), sort_keys=True, separators=(",", ":"))
        again = Proof.from_json(json.loads(line))
        assert again == proof and again.problem(KEYS) is None
    mine = proofs[2]
    changed = Proof(replace(mine.receipt, outcome="DROPPED"), mine.inclusion)
    assert "do not make the signed root" in str(changed.problem(KEYS))
    moved = Proof(replace(mine.receipt, seq=mine.receipt.seq + 1), mine.inclusion)  # claims a neighbour's place
    assert "do not make the signed root" in str(moved.problem(KEYS))
    bent = Proof(mine.receipt, replace(mine.inclusion, path=(mine.inclusion.path[0][::-1], *mine.inclusion.path[1:])))
    assert "do not make the signed root" in str(bent.problem(KEYS))
    other = Signer(Ed25519PrivateKey.generate())
    resigned = Proof(mine.receipt, replace(mine.inclusion, checkpoint=other.checkpoint(receipts[6:12], 1)))
    assert "not one of the 1 keys given" in str(resigned.problem(KEYS))
    with pytest.raises(ValueError, match="path is a list of hex"):
        Proof.from_json({**mine.to_json(), "path": "ab"})


def test_a_signer_never_shows_its_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cryptography.hazmat.primitives import serialization

    key = Ed25519PrivateKey.generate()
    pem = tmp_path / "receipts.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    signer = Signer.from_file(pem)
    assert repr(signer) == f"Signer(key_id={signer.key_id})"
    raw = tmp_path / "raw.key"
    raw.write_bytes(key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                      serialization.NoEncryption()))
    assert Signer.from_file(raw).key_id == signer.key_id
    bad = tmp_path / "bad.pem"
    bad.write_bytes(b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXZhbHVl\n-----END PRIVATE KEY-----\n")
    with pytest.raises(ValueError) as refused:
        Signer.from_file(bad)
    assert "c2VjcmV0" not in str(refused.value) and str(bad) in str(refused.value)


_text = st.text(st.characters(codec="utf-8"), max_size=12)


@given(strings=st.lists(_text, min_size=12, max_size=12), numbers=st.lists(st.integers(-(2**53), 2**53), min_size=2,
                                                                           max_size=2),
       optional=st.lists(st.none() | _text, min_size=4, max_size=4), kind=st.sampled_from(Kind))
def test_a_receipts_bytes_are_its_fields_canonical_json(strings: list[str], numbers: list[int],
                                                        optional: list[str | None], kind: Kind) -> None:
    """Written field by field for speed; the same bytes as the general encoder, which an
    auditor's ``json.dumps`` reproduces."""
    receipt = Receipt(strings[0], numbers[0], strings[1], kind, *strings[2:11], numbers[1], *optional)
    assert receipt.to_bytes() == canonical_bytes(receipt.to_json())
    assert json.loads(receipt.to_bytes()) == receipt.to_json()
