"""Receipts read from the cluster and held against the decisions they certify: the online half
of `runonce audit` (the offline half, with only the public keys, is runonce/receipts/verify.py).

``certify`` answers the question the chains alone cannot: does every decision have exactly
one receipt, and every receipt a decision? A decision with none (written outside the
receipts' transaction, or its receipt lost), two receipts for one decision record, a receipt
whose record no decision topic holds (a receipt for something that never happened)."""

from __future__ import annotations

import json
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
from runonce.receipts.verify import proofs_of
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
        lines = read_lines((r.value or b"").split(b"\n"), where)
        log.receipts.extend(lines.receipts)
        log.checkpoints.extend(lines.checkpoints)
    return log


@dataclass(frozen=True, slots=True)
class Selection:
    """Which receipts a filtered export holds: a tenant's, an agent's, and those of segments
    written within [since_ms, until_ms) (broker time). None: any."""

    tenant: str | None = None
    agent_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.tenant, self.agent_id, self.since_ms, self.until_ms))

    def keeps(self, receipt: Receipt) -> bool:
        return ((self.tenant is None or receipt.tenant == self.tenant)
                and (self.agent_id is None or receipt.agent_id == self.agent_id))


def export(bootstrap: KafkaTarget, out: Path, progress: Callable[[str], None],
           selection: Selection = Selection()) -> tuple[int, int]:
    """To ``out`` (JSON lines), what ``runonce audit verify`` reads offline: every segment of
    actions.receipts, its lines verbatim (whole chains); or, with a ``selection``, a proof for
    each receipt selected (its signed checkpoint and audit path: it verifies alone, and the
    others' receipts stay out of the file). Returns (receipts, checkpoints) written (a proof
    holds its checkpoint: none apart)."""
    receipts = checkpoints = 0
    with out.open("wb") as f:
        for r in read_all(bootstrap, topics.RECEIPTS, since_ms=selection.since_ms, until_ms=selection.until_ms):
            lines = (r.value or b"").split(b"\n")
            if selection:
                segment = read_lines(lines, f"{topics.RECEIPTS}[{r.partition}]@{r.offset}")
                for checkpoint in segment.checkpoints:  # one a segment
                    for proof in proofs_of(segment.receipts, checkpoint):
                        if selection.keeps(proof.receipt):
                            f.write(json.dumps(proof.to_json(), sort_keys=True, separators=(",", ":"),
                                               ensure_ascii=False).encode("utf-8") + b"\n")
                            receipts += 1
            else:
                f.write(b"\n".join(lines) + b"\n")
                receipts, checkpoints = receipts + len(lines) - 1, checkpoints + 1
            if r.offset % 1000 == 0:
                progress(f"{topics.RECEIPTS}[{r.partition}]@{r.offset}: {receipts:,} receipts written")
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
