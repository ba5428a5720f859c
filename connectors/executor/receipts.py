"""An executor's receipts (runonce/receipts): one for each final result it commits, on the chain
of its vendor's approved partition, in the transaction that commits the result
(runonce/kafka/receipts.py). The result record carries its receipt's proof (``runonce.receipt``
header), so whoever reads the result (an agent's SDK, the gateway) holds a copy that verifies
with the public keys alone.

An intent (``attempting``, a withdrawn one too) is no outcome: it certifies nothing and gets no
receipt; compaction of ``actions.results`` may remove it, and nothing is missing then."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from runonce.core.tenant import DEFAULT_TENANT
from runonce.kafka.receipts import Receipts, head_of
from runonce.kafka.record import Headers, Out, find_header
from runonce.receipts.canonical import canonical_bytes, sha256_hex
from runonce.receipts.chain import Head
from runonce.receipts.receipt import Kind, Receipt
from runonce.receipts.verify import proofs_of
from runonce.wire.headers import H_POLICIES, H_RECEIPT
from runonce.wire.results import Result
from runonce.wire.trace import TRACEPARENT


def chain_name(group: str, partition: int) -> str:
    """The chain of the outcomes of executor group ``group`` (a vendor's: ``runonce-exec-<vendor>``)
    on approved partition ``partition``: one owner at a time is what a group guarantees."""
    return f"outcomes/{group}/{partition}"


class ChainHeads(Protocol):
    """Where the executor's chain of a partition stands, read when the partition is given."""

    def head(self, partition: int) -> Head: ...

    def close(self) -> None: ...


class ReadHeads:
    """Heads read from ``actions.receipts`` (runonce/kafka/receipts.py) by a read_committed ``reader``."""

    def __init__(self, reader: Any, group: str, timeout_s: float) -> None:
        self.reader = reader
        self.group = group
        self.timeout_s = timeout_s

    def head(self, partition: int) -> Head:
        return head_of(self.reader, partition, chain_name(self.group, partition), timeout_s=self.timeout_s)

    def close(self) -> None:
        self.reader.close()


def answer_sha256(result: Result) -> str:
    """The vendor's answer as the result records it (its reference and its error text), hashed:
    a receipt holds no vendor text."""
    return sha256_hex(canonical_bytes({"error": result.error, "vendor_ref": result.vendor_ref}))


@dataclass(frozen=True, slots=True)
class Certifies:
    """What one outcome's receipt is made from: the result record as written, and what it is for."""

    out: Out
    request: Mapping[str, Any]
    result: Result
    completed_at_ms: int
    #: the approved record's headers: its policies' digest and its trace context
    decision_headers: Headers
    #: why, when the result is no effect of this action's own: ``blocked_duplicate`` (another
    #: action already used its vendor key: the result repeats that one's); empty otherwise
    reason: str = ""

    def receipt_at(self, chain: str, seq: int, prev: str) -> Receipt | None:
        if not self.result.status.final or self.out.value is None:
            return None
        policy = find_header(self.decision_headers, H_POLICIES)
        traceparent = find_header(self.decision_headers, TRACEPARENT)
        return Receipt(
            chain=chain, seq=seq, prev=prev, kind=Kind.OUTCOME,
            action_id=str(self.request["action_id"]), tenant=str(self.request.get("tenant") or DEFAULT_TENANT),
            agent_id=str(self.request["agent_id"]), tool=str(self.request["tool"]),
            params_sha256=sha256_hex(str(self.request["params_json"]).encode("utf-8")),
            policy=policy.decode("ascii", "replace") if policy is not None else "",
            outcome=self.result.status.value, reason=self.reason, record_sha256=sha256_hex(self.out.value),
            at_ms=self.completed_at_ms, answer_sha256=answer_sha256(self.result),
            vendor_ref=self.result.vendor_ref,
            trace_id=traceparent.decode("ascii", "replace").split("-")[1] if traceparent is not None else None)

    def encode(self, chain: str, seq: int, prev: str) -> bytes | None:
        """An ``Encode`` (runonce/kafka/receipts.py): its receipt's canonical bytes."""
        receipt = self.receipt_at(chain, seq, prev)
        return None if receipt is None else receipt.to_bytes()


class Signing:
    """An executor's receipts in one seam: where its chains stand (read for each partition given),
    the receipts of the result transaction being written, and what its commit or abort means."""

    def __init__(self, receipts: Receipts, heads: ChainHeads) -> None:
        self.receipts = receipts
        self.heads = heads

    def given(self, partitions: list[int]) -> None:
        """Every partition given, each time (a classic group's assignment is whole): another owner
        may have moved a chain since this one last held it. Called after the results restore,
        which waited out the previous owner's open transactions."""
        for p in partitions:
            self.receipts.own(p, self.heads.head(p))

    def committed(self) -> None:
        self.receipts.committed_now()

    def aborted(self) -> None:
        """The chains stand where the last commit left them."""
        self.receipts.aborted()

    def close(self) -> None:
        self.heads.close()

    def with_receipts(self, certified: list[Certifies], others: list[Out], signed_at_ms: int) -> list[Out]:
        """The transaction's records with receipts: each final result carrying its proof, the
        other records as they are, and the segments last. A result goes on the chain of its
        partition (results partition p is approved partition p's: wire/results.py)."""
        placed: dict[tuple[str, int], int] = {}  # a receipt's place -> the index of its result record
        for i, one in enumerate(certified):
            partition = one.out.partition or 0
            seq = self.receipts.add(partition, Certifies.encode, one)
            if seq is not None:
                placed[(self.receipts.committed[partition].chain, seq)] = i
        sealed = self.receipts.seal(signed_at_ms)
        proofs: dict[int, bytes] = {}
        for segment in sealed:
            signed = [Receipt.from_json(json.loads(line)) for line in segment.lines]
            for proof in proofs_of(signed, segment.checkpoint):
                proofs[placed[(proof.receipt.chain, proof.receipt.seq)]] = proof.to_line()
        results = [one.out.with_header(H_RECEIPT, proofs[i]) if i in proofs else one.out
                   for i, one in enumerate(certified)]
        return [*results, *others, *(segment.out for segment in sealed)]
