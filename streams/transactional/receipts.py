"""Receipts in the worker's transaction: each decision's receipt (streams/receipts.py) placed
on its partition's chain, and at the end of the transaction one **segment** per chain it wrote
to: that transaction's receipts on the chain, one canonical receipt a line, and a last line
that is their checkpoint, signed. All of it is in the transaction that writes the decisions
and commits their input offsets: a receipt exists exactly when its decision does. (One record
a chain a transaction, not one a receipt: a record's own cost in the producer and the broker
was most of what a receipt cost, bench/tls_cost.py --variant RUNONCE_RECEIPTS_KEY=...)

A chain is the partition's: partition p of ``actions.receipts`` is written by the owner of
partition p of every input (the range assignor gives them to one worker; its transactional id
fences a zombie). A new owner finds where the chain stands from its last record, which is a
checkpoint (every transaction ends with one), read read_committed once the previous owner's
transactions are resolved (the stable offsets of KIP-447 were read first)."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import TopicPartition

from runonce.errors import FatalError
from runonce.kafka import topics
from runonce.kafka.record import Out
from runonce.receipts.canonical import canonical_bytes
from runonce.receipts.chain import Head
from runonce.receipts.receipt import Receipt
from runonce.receipts.signing import Checkpoint, Signer
from runonce.streams.receipts import decision_receipt
from runonce.wire.headers import H_RECEIPT_TYPE

SEGMENT = (H_RECEIPT_TYPE, b"segment")
#: the most receipts a segment holds: about 300 KB, under actions.receipts' 1 MiB a record
SEGMENT_RECEIPTS = 500


def chain_of(partition: int) -> str:
    return f"decisions/{partition}"


class ReceiptsStuck(FatalError):
    """The receipts partition's tail could not be read (an unresolved transaction, no broker)."""


class Receipts:
    """The receipts of the worker's open transaction, and where each of its chains stands."""

    def __init__(self, signer: Signer) -> None:
        self.signer = signer
        #: each owned chain as the last committed transaction left it
        self.committed: dict[int, Head] = {}
        self._heads: dict[int, Head] = {}
        #: each chain's receipts in the open transaction, with their canonical bytes
        self._open: dict[int, list[tuple[Receipt, bytes]]] = {}

    def own(self, partition: int, head: Head) -> None:
        self.committed[partition] = head

    def disown(self, partition: int) -> None:
        self.committed.pop(partition, None)

    def note(self, partition: int, outs: list[Out]) -> None:
        """A receipt for each decision in ``outs`` (what one input record caused on ``partition``)."""
        for out in outs:
            head = self._heads.get(partition) or self.committed[partition]
            receipt = decision_receipt(out, head)
            if receipt is None:
                continue
            data = receipt.to_bytes()  # once: the record, the chain's next link and the checkpoint's leaf
            self._heads[partition] = head.after(data)
            self._open.setdefault(partition, []).append((receipt, data))

    def segments(self, signed_at_ms: int) -> list[Out]:
        """The transaction's receipts, a record a chain: its receipts and their signed checkpoint."""
        out = []
        for partition, placed in sorted(self._open.items()):
            for start in range(0, len(placed), SEGMENT_RECEIPTS):
                part = placed[start:start + SEGMENT_RECEIPTS]
                lines = [data for _, data in part]
                checkpoint = self.signer.checkpoint([r for r, _ in part], signed_at_ms, lines)
                out.append(Out(topics.RECEIPTS, chain_of(partition).encode(),
                               b"\n".join([*lines, canonical_bytes(checkpoint.to_json())]), partition,
                               headers=(SEGMENT,)))
        return out

    def committed_now(self) -> None:
        self.committed.update((p, h) for p, h in self._heads.items() if p in self.committed)
        self._heads, self._open = {}, {}

    def aborted(self) -> None:
        self._heads, self._open = {}, {}


def head_of(reader: Any, partition: int, *, timeout_s: float = 60.0) -> Head:
    """Where chain ``partition`` stands: after the last record of ``actions.receipts`` p."""
    tp = TopicPartition(topics.RECEIPTS, partition)
    low, high = (int(x) for x in reader.get_watermark_offsets(tp, timeout=timeout_s, cached=False))
    back = 8
    deadline = time.monotonic() + timeout_s
    while True:
        start = max(low, high - back)
        last = None
        reader.assign([TopicPartition(topics.RECEIPTS, partition, start)])
        try:
            position = start
            while position < high:
                if time.monotonic() > deadline:
                    raise ReceiptsStuck(f"{topics.RECEIPTS}[{partition}] not read to {high} within {timeout_s:.0f} s")
                for msg in reader.consume(1000, 0.1):
                    if msg.error():
                        if msg.error().fatal():
                            raise ReceiptsStuck(f"{topics.RECEIPTS}[{partition}]: {msg.error()}")
                        continue
                    last = msg
                position = max(position, reader.position([tp])[0].offset)
        finally:
            reader.unassign()
        if last is not None:
            return _after(partition, last)
        if start == low:
            return Head(chain_of(partition))
        back *= 8  # only markers or aborted records so far: look further back


def _after(partition: int, msg: Any) -> Head:
    """The head after a segment: its last line is the checkpoint over the chain's last receipts."""
    checkpoint = Checkpoint(**json.loads(msg.value().rsplit(b"\n", 1)[-1]))
    return Head(chain_of(partition), checkpoint.last_seq + 1, checkpoint.last_digest)
