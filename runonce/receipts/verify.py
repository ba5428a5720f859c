"""Offline verification of receipts: only the receipts, the checkpoints and the public keys.

Each chain is classed by the worst it shows, and the first bad record is named:

* ``tampered``  a receipt whose digest its successor does not hold (changed, or moved), two
                receipts at one place, a checkpoint whose signature does not hold (another
                key, changed bytes) or whose root or last digest its receipts do not make;
* ``gap``       a receipt missing (removed, or never exported) before the chain's last;
* ``open``      intact, with receipts after its last checkpoint (not signed yet: the end of
                an unsigned tail can be cut without a trace);
* ``verified``  intact and every receipt under a valid signed root.

What it proves, and what not (docs/receipts.md): that the records were not changed after
they were signed, by whoever holds the key; not that the signer was honest.
"""

from __future__ import annotations

import enum
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from runonce.receipts import merkle
from runonce.receipts.receipt import Receipt
from runonce.receipts.signing import Checkpoint, signature_problem


class Verdict(enum.Enum):
    VERIFIED = "verified"
    OPEN = "open"
    GAP = "gap"
    TAMPERED = "tampered"


@dataclass(frozen=True, slots=True)
class ChainReport:
    chain: str
    verdict: Verdict
    receipts: int
    #: the last seq under a valid signed root (None: none)
    signed_through: int | None
    #: the first bad record, named (None when verified or open)
    problem: str | None = None


def verify(receipts: Iterable[Receipt], checkpoints: Iterable[Checkpoint],
           keys: Mapping[str, Ed25519PublicKey]) -> list[ChainReport]:
    """One report a chain, in chain order."""
    by_chain: dict[str, list[Receipt]] = defaultdict(list)
    for receipt in receipts:
        by_chain[receipt.chain].append(receipt)
    signed: dict[str, list[Checkpoint]] = defaultdict(list)
    for checkpoint in checkpoints:
        signed[checkpoint.chain].append(checkpoint)
    return [_chain(name, by_chain.get(name, []), signed.get(name, []), keys)
            for name in sorted(set(by_chain) | set(signed))]


def _chain(name: str, receipts: list[Receipt], checkpoints: list[Checkpoint],
           keys: Mapping[str, Ed25519PublicKey]) -> ChainReport:
    at: dict[int, Receipt] = {}
    for r in receipts:
        other = at.get(r.seq)
        if other is not None and other != r:
            return ChainReport(name, Verdict.TAMPERED, len(receipts), None,
                               f"two different receipts at {name}#{r.seq} (actions {other.action_id}, {r.action_id})")
        at[r.seq] = r
    digests = {seq: r.digest() for seq, r in at.items()}
    last = max(at, default=-1)
    signed_last = max((c.last_seq for c in checkpoints), default=-1)
    gap: str | None = None
    for seq in range(0, max(last, signed_last) + 1):
        placed = at.get(seq)
        if placed is None:
            gap = gap or f"{name}#{seq} is missing" + (f" (the chain goes on to #{last})" if seq < last else
                                                       f" (checkpoint signed through #{signed_last})")
            continue
        want = digests.get(seq - 1, "") if seq else ""
        if seq and seq - 1 not in at:
            continue  # its predecessor is the gap already named
        if placed.prev != want:
            return ChainReport(name, Verdict.TAMPERED, len(receipts), None,
                               f"{name}#{seq - 1} (action {at[seq - 1].action_id}) is not the receipt "
                               f"{name}#{seq} (action {placed.action_id}) follows: changed, or moved"
                               if seq else f"{name}#0 (action {placed.action_id}) names a receipt before it")
    signed_through: int | None = None
    expected_first = 0
    for c in sorted(checkpoints, key=lambda c: c.first_seq):
        where = f"checkpoint {name}#{c.first_seq}..#{c.last_seq}"
        problem = signature_problem(c, keys)
        if problem is not None:
            return ChainReport(name, Verdict.TAMPERED, len(receipts), signed_through, f"{where}: {problem}")
        if c.first_seq != expected_first or c.last_seq < c.first_seq:
            return ChainReport(name, Verdict.TAMPERED, len(receipts), signed_through,
                               f"{where}: expected to start at #{expected_first}")
        span = [at.get(seq) for seq in range(c.first_seq, c.last_seq + 1)]
        present = [r for r in span if r is not None]
        if len(present) != len(span):
            break  # the gap is named below; a root over missing receipts cannot be checked
        if merkle.root([merkle.leaf_hash(r.to_bytes()) for r in present]).hex() != c.root:
            return ChainReport(name, Verdict.TAMPERED, len(receipts), signed_through,
                               f"{where}: its receipts do not make its root (one of them changed)")
        if digests[c.last_seq] != c.last_digest:
            return ChainReport(name, Verdict.TAMPERED, len(receipts), signed_through,
                               f"{where}: #{c.last_seq} is not the receipt it signed")
        signed_through, expected_first = c.last_seq, c.last_seq + 1
    if gap is not None:
        return ChainReport(name, Verdict.GAP, len(receipts), signed_through, gap)
    if last > (signed_through if signed_through is not None else -1):
        return ChainReport(name, Verdict.OPEN, len(receipts), signed_through)
    return ChainReport(name, Verdict.VERIFIED, len(receipts), signed_through)


@dataclass(frozen=True, slots=True)
class Inclusion:
    """What an agent keeps beside its receipt: the signed checkpoint over it and its audit path."""

    checkpoint: Checkpoint
    #: hex hashes, RFC 9162's audit path of the receipt among the checkpoint's
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Proof:
    """A receipt that proves itself alone: what an agent keeps of its own action, and each line
    of a filtered export (``runonce audit export --tenant``), whose chains are not whole."""

    receipt: Receipt
    inclusion: Inclusion

    def to_json(self) -> dict[str, object]:
        return {"receipt": self.receipt.to_json(), "checkpoint": self.inclusion.checkpoint.to_json(),
                "path": list(self.inclusion.path)}

    def to_line(self) -> bytes:
        """One JSON line, as an export writes it and a result carries it (UTF-8, keys sorted)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> Proof:
        """ValueError naming what does not fit."""
        receipt, checkpoint, path = raw.get("receipt"), raw.get("checkpoint"), raw.get("path")
        if not isinstance(receipt, dict) or not isinstance(checkpoint, dict):
            raise ValueError("a proof holds a receipt and a checkpoint, each a JSON object")
        if not isinstance(path, list) or not all(isinstance(p, str) for p in path):
            raise ValueError("a proof's path is a list of hex hashes")
        try:
            signed = Checkpoint(**checkpoint)
        except TypeError as exc:
            raise ValueError(f"its checkpoint: {exc}") from None
        return cls(Receipt.from_json(receipt), Inclusion(signed, tuple(path)))

    def problem(self, keys: Mapping[str, Ed25519PublicKey]) -> str | None:
        return inclusion_problem(self.receipt, self.inclusion, keys)


def proofs_of(signed: list[Receipt], checkpoint: Checkpoint) -> list[Proof]:
    """A proof for each receipt ``checkpoint`` signs (``signed``, in seq order)."""
    paths = merkle.inclusion_proofs([merkle.leaf_hash(r.to_bytes()) for r in signed])
    return [Proof(r, Inclusion(checkpoint, tuple(p.hex() for p in path))) for r, path in zip(signed, paths)]


def inclusion_of(receipt: Receipt, signed: list[Receipt], checkpoint: Checkpoint) -> Inclusion:
    """``receipt``'s inclusion in ``checkpoint``, whose receipts are ``signed`` (in seq order)."""
    leaves = [merkle.leaf_hash(r.to_bytes()) for r in signed]
    path = merkle.inclusion_proof(receipt.seq - checkpoint.first_seq, leaves)
    return Inclusion(checkpoint, tuple(p.hex() for p in path))


def inclusion_problem(receipt: Receipt, inclusion: Inclusion, keys: Mapping[str, Ed25519PublicKey]) -> str | None:
    """Why ``receipt`` is not proven under its signed checkpoint, or None: its own copy,
    checked against a published key without the runonce operator's log."""
    c = inclusion.checkpoint
    where = f"{receipt.chain}#{receipt.seq} (action {receipt.action_id})"
    if receipt.chain != c.chain or not c.first_seq <= receipt.seq <= c.last_seq:
        return f"{where} is not among the receipts of checkpoint {c.chain}#{c.first_seq}..#{c.last_seq}"
    problem = signature_problem(c, keys)
    if problem is not None:
        return f"checkpoint {c.chain}#{c.first_seq}..#{c.last_seq}: {problem}"
    try:
        path = [bytes.fromhex(p) for p in inclusion.path]
    except ValueError:
        return f"{where}: its audit path is not hex"
    made = merkle.root_from_proof(merkle.leaf_hash(receipt.to_bytes()), receipt.seq - c.first_seq,
                                  c.last_seq - c.first_seq + 1, path)
    if made is None or made.hex() != c.root:
        return f"{where} and its audit path do not make the signed root (the receipt or the path changed)"
    return None
