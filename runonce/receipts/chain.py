"""A chain of receipts: each holds the digest of the one before it, so none can be changed,
removed or moved without the next one saying so. One chain a partition, one writer a chain
(the partition's owner, fenced by its transactional id), so a chain never forks."""

from __future__ import annotations

from dataclasses import dataclass, replace

from runonce.receipts.canonical import sha256_hex
from runonce.receipts.receipt import Receipt


@dataclass(frozen=True, slots=True)
class Head:
    """Where a chain stands: what the next receipt's ``seq`` and ``prev`` are."""

    chain: str
    next_seq: int = 0
    last_digest: str = ""

    def link(self, receipt: Receipt) -> tuple[Receipt, Head]:
        """``receipt`` placed on this chain (its chain, seq and prev set), and the head after it."""
        linked = replace(receipt, chain=self.chain, seq=self.next_seq, prev=self.last_digest)
        return linked, self.after(linked.to_bytes())

    def after(self, placed: bytes) -> Head:
        """The head once the receipt this head placed (its canonical bytes) is on the chain."""
        return Head(self.chain, self.next_seq + 1, sha256_hex(placed))
