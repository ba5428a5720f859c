"""Receipts in a transaction (runonce/receipts): each receipt placed on its partition's chain,
and at the end of the transaction one **segment** per chain it wrote to: that transaction's
receipts on the chain, one canonical receipt a line, and a last line that is their checkpoint,
signed. All of it is in the transaction that writes what the receipts certify and commits its
input offsets: a receipt exists exactly when its record does. (One record a chain a
transaction, not one a receipt: a record's own cost in the producer and the broker was most of
what a receipt cost, bench/tls_cost.py --variant RUNONCE_RECEIPTS_KEY=...)

Two writers keep chains, each on partition p of ``actions.receipts`` for the partition p it
owns, keyed by the chain's name: the stream worker (``decisions/p``, its decisions) and each
vendor's executor group (``outcomes/<group>/p``, its results). One owner a chain at a time: the
group gives partition p to one member, and a zombie's transaction cannot commit (the worker's
transactional id, an executor's group generation: KIP-447). A new owner
finds where its chain stands from the chain's last segment, whose last line is a checkpoint
(every transaction ends on one), read read_committed once the previous owner's transactions
are resolved."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from confluent_kafka import TopicPartition

from runonce.errors import FatalError
from runonce.kafka import topics
from runonce.kafka.record import Out
from runonce.receipts.canonical import canonical_bytes, sha256_hex
from runonce.receipts.chain import Head
from runonce.receipts.signing import Checkpoint, Signer
from runonce.wire.headers import H_RECEIPT_TYPE

SEGMENT = (H_RECEIPT_TYPE, b"segment")
#: the most receipts a segment holds: about 300 KB, under actions.receipts' 1 MiB a record
SEGMENT_RECEIPTS = 500

T = TypeVar("T")


class ReceiptsStuck(FatalError):
    """The receipts partition's tail could not be read (an unresolved transaction, no broker)."""


#: what makes a receipt's canonical bytes for one record, given where it goes on its chain:
#: (the record, chain, seq, prev) -> the bytes, or None when the record certifies nothing
Encode = Callable[[T, str, int, str], "bytes | None"]


@dataclass(frozen=True, slots=True)
class Sealed:
    """One segment of a transaction: its record, and the receipts its checkpoint signs (their
    canonical bytes, in seq order, from ``checkpoint.first_seq``)."""

    out: Out
    lines: list[bytes]
    checkpoint: Checkpoint


class Receipts:
    """The receipts of the writer's open transaction, and where each of its chains stands.

    Receipts are kept as their canonical bytes: one per record a writer certifies, made by its
    ``Encode`` in one go (streams/receipts.py), hashed once for the chain and once as a leaf."""

    def __init__(self, signer: Signer) -> None:
        self.signer = signer
        #: each owned chain as the last committed transaction left it
        self.committed: dict[int, Head] = {}
        #: each chain written in the open transaction: (its next seq, its last receipt's digest)
        self._heads: dict[int, tuple[int, str]] = {}
        #: each chain's receipts in the open transaction
        self._open: dict[int, list[bytes]] = {}

    def own(self, partition: int, head: Head) -> None:
        self.committed[partition] = head

    def disown(self, partition: int) -> None:
        self.committed.pop(partition, None)

    def add(self, partition: int, encode: Encode[T], record: T) -> int | None:
        """The receipt of ``record`` placed next on the chain of ``partition``; its seq, or None
        when ``encode`` says the record certifies nothing."""
        committed = self.committed[partition]
        seq, prev = self._heads.get(partition) or (committed.next_seq, committed.last_digest)
        data = encode(record, committed.chain, seq, prev)
        if data is None:
            return None
        self._heads[partition] = (seq + 1, sha256_hex(data))
        self._open.setdefault(partition, []).append(data)
        return seq

    def seal(self, signed_at_ms: int) -> list[Sealed]:
        """The transaction's receipts, a record a chain (a long run in several): its receipts
        and their signed checkpoint."""
        out = []
        for partition, lines in sorted(self._open.items()):
            chain = self.committed[partition].chain
            first = self.committed[partition].next_seq
            for start in range(0, len(lines), SEGMENT_RECEIPTS):
                part = lines[start:start + SEGMENT_RECEIPTS]
                last = (self._heads[partition][1] if start + SEGMENT_RECEIPTS >= len(lines)
                        else sha256_hex(part[-1]))
                checkpoint = self.signer.checkpoint_over(chain, first + start, part, last, signed_at_ms)
                record = Out(topics.RECEIPTS, chain.encode(), b"\n".join([*part, canonical_bytes(checkpoint.to_json())]),
                             partition, headers=(SEGMENT,))
                out.append(Sealed(record, part, checkpoint))
        return out

    def segments(self, signed_at_ms: int) -> list[Out]:
        return [sealed.out for sealed in self.seal(signed_at_ms)]

    def committed_now(self) -> None:
        for p, (seq, digest) in self._heads.items():
            if p in self.committed:
                self.committed[p] = Head(self.committed[p].chain, seq, digest)
        self._heads, self._open = {}, {}

    def aborted(self) -> None:
        self._heads, self._open = {}, {}


def head_of(reader: Any, partition: int, chain: str, *, timeout_s: float = 60.0) -> Head:
    """Where ``chain`` stands: after its last segment on ``actions.receipts`` p. ``reader``
    reads read_committed. Other chains share the partition, so the reading goes back from the
    end in growing windows until it meets one of the chain's segments (or the beginning: a
    new chain). A chain that has not moved for long is found as far back as it last moved."""
    tp = TopicPartition(topics.RECEIPTS, partition)
    low, high = (int(x) for x in reader.get_watermark_offsets(tp, timeout=timeout_s, cached=False))
    key = chain.encode()
    back = 8
    end = high
    deadline = time.monotonic() + timeout_s
    while end > low:
        start = max(low, end - back)
        last = None
        reader.assign([TopicPartition(topics.RECEIPTS, partition, start)])
        try:
            position = start
            while position < end:
                if time.monotonic() > deadline:
                    raise ReceiptsStuck(f"{topics.RECEIPTS}[{partition}] not read to {end} within {timeout_s:.0f} s")
                for msg in reader.consume(1000, 0.1):
                    if msg.error():
                        if msg.error().fatal():
                            raise ReceiptsStuck(f"{topics.RECEIPTS}[{partition}]: {msg.error()}")
                        continue
                    if msg.offset() < end and msg.key() == key:
                        last = msg
                position = max(position, reader.position([tp])[0].offset)
        finally:
            reader.unassign()
        if last is not None:
            return _after(chain, last)
        end = start
        back *= 8  # only other chains, markers or aborted records so far: look further back
        deadline = time.monotonic() + timeout_s  # progress: the wait is for a stall
    return Head(chain)


def _after(chain: str, msg: Any) -> Head:
    """The head after a segment: its last line is the checkpoint over the chain's last receipts."""
    checkpoint = Checkpoint(**json.loads(msg.value().rsplit(b"\n", 1)[-1]))
    return Head(chain, checkpoint.last_seq + 1, checkpoint.last_digest)
