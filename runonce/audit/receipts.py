"""Receipts read from the cluster and held against the decisions they certify: the online half
of `runonce audit` (the offline half, with only the public keys, is runonce/receipts/verify.py).

``certify`` answers the question the chains alone cannot: does every decision have exactly
one receipt, and every receipt a decision? A decision with none (written outside the
receipts' transaction, or its receipt lost), two receipts for one decision record, a receipt
whose record no decision topic holds (a receipt for something that never happened)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from runonce.kafka import topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.kafka.record import Record
from runonce.receipts.canonical import sha256_hex
from runonce.receipts.files import read_lines
from runonce.receipts.receipt import Receipt
from runonce.receipts.signing import Checkpoint
from runonce.wire.codec import Codec
from runonce.wire.headers import H_RECEIPT_TYPE


@dataclass(frozen=True, slots=True)
class ReceiptLog:
    receipts: list[Receipt]
    checkpoints: list[Checkpoint]


def parse(records: Iterable[Record]) -> ReceiptLog:
    """The records of actions.receipts: segments, each its receipts a line and their checkpoint
    last (streams/transactional/receipts.py); ValueError naming a record that is not one."""
    log = ReceiptLog([], [])
    for r in records:
        kind = dict(r.headers).get(H_RECEIPT_TYPE)
        where = f"{topics.RECEIPTS}[{r.partition}]@{r.offset}"
        if kind != b"segment":
            raise ValueError(f"{where} is not a segment of receipts: header {H_RECEIPT_TYPE} is {kind!r}")
        receipts, checkpoints = read_lines((r.value or b"").split(b"\n"), where)
        log.receipts.extend(receipts)
        log.checkpoints.extend(checkpoints)
    return log


def export(bootstrap: KafkaTarget, out: Path, progress: Callable[[str], None]) -> tuple[int, int]:
    """Every segment of actions.receipts, its lines verbatim, to ``out`` (JSON lines): what
    ``runonce audit verify`` reads offline. Returns (receipts, checkpoints) written."""
    receipts = checkpoints = 0
    with out.open("wb") as f:
        for r in read_all(bootstrap, topics.RECEIPTS):
            lines = (r.value or b"").split(b"\n")
            f.write(b"\n".join(lines) + b"\n")
            receipts, checkpoints = receipts + len(lines) - 1, checkpoints + 1
            if checkpoints % 1000 == 0:
                progress(f"{receipts:,} receipts, {checkpoints:,} checkpoints written")
    return receipts, checkpoints


def read_receipts(bootstrap: KafkaTarget) -> ReceiptLog:
    return parse(read_all(bootstrap, topics.RECEIPTS))


@dataclass(frozen=True, slots=True)
class Certified:
    #: decision record hashes with no receipt: action id -> count
    uncertified: dict[str, int] = field(default_factory=dict)
    #: decision records with more than one receipt: action id -> receipts
    doubled: dict[str, int] = field(default_factory=dict)
    #: receipts whose record no decision topic holds: action id -> count
    phantoms: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.uncertified or self.doubled or self.phantoms)

    def summary(self) -> str:
        def first(found: dict[str, int]) -> str:
            return ", ".join(sorted(found)[:3]) or "-"
        return (f"decisions without a receipt {len(self.uncertified)} (e.g. {first(self.uncertified)}); "
                f"decisions with two or more {len(self.doubled)} (e.g. {first(self.doubled)}); "
                f"receipts of no decision {len(self.phantoms)} (e.g. {first(self.phantoms)})")


def decision_hashes(records: Iterable[Record], codec: Codec) -> dict[str, str]:
    """record sha256 -> its action id, for each decision record given."""
    out: dict[str, str] = {}
    for r in records:
        if r.value is not None:
            out[sha256_hex(r.value)] = str(codec.decode(r.value, expect="ActionDecision")[1]["request"]["action_id"])
    return out


def certify(receipts: Iterable[Receipt], decisions: Mapping[str, str]) -> Certified:
    """``decisions``: the sha256 of each decision record written -> its action id. Every one
    must have exactly one receipt, and every receipt one of them."""
    count: dict[str, int] = defaultdict(int)
    by_hash: dict[str, str] = {}
    for r in receipts:
        count[r.record_sha256] += 1
        by_hash[r.record_sha256] = r.action_id
    uncertified = {action: 1 for digest, action in decisions.items() if count.get(digest, 0) == 0}
    doubled = {decisions[d]: n for d, n in count.items() if n > 1 and d in decisions}
    phantoms = {by_hash[d]: n for d, n in count.items() if d not in decisions}
    return Certified(uncertified, doubled, phantoms)
