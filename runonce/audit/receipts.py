"""Receipts read from the cluster and held against the records they certify: the online half
of `runonce audit` (the offline half, with only the public keys, is runonce/receipts/verify.py).

``certify`` answers the question the chains alone cannot: does every decision (and every
executor's final result) have exactly one receipt, and every receipt its record? A record with
none (written outside the receipts' transaction, or its receipt lost), two receipts for one
record, a receipt whose record its topic does not hold (a receipt for something that never
happened, or a result topic compacted or rewritten past an effect). ``check`` does it for a
time range of the cluster's topics (``runonce audit check``)."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Iterable, Mapping

from runonce.audit.parquet import ProofWriter
from runonce.core.tenant import DEFAULT_TENANT
from runonce.kafka import topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.kafka.record import Record
from runonce.receipts.canonical import sha256_hex
from runonce.receipts.files import read_lines
from runonce.receipts.receipt import Kind, Receipt
from runonce.receipts.signing import Checkpoint
from runonce.receipts.verify import proofs_of
from runonce.wire.codec import Codec
from runonce.wire.headers import H_RECEIPT_TYPE
from runonce.wire.results import Status

#: the topics whose records the stream job's receipts certify
DECISION_TOPICS = (topics.APPROVED, topics.DROPPED, topics.HELD)
#: how much earlier than ``--since`` a check reads records: a receipt's segment is written at
#: the end of its transaction, after the records it certifies
SLACK_MS = 5 * 60 * 1000


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
    """To ``out``, what ``runonce audit verify`` reads offline. JSON lines: every segment of
    actions.receipts, its lines verbatim (whole chains); or, with a ``selection``, a proof for
    each receipt selected (its signed checkpoint and audit path: it verifies alone, and the
    others' receipts stay out of the file). Parquet (``out`` ending ``.parquet``): a row a
    receipt, each with its proof (parquet.py), whole or selected. Returns (receipts,
    checkpoints) written (a proof holds its checkpoint: none apart)."""
    receipts = checkpoints = 0
    as_proofs = bool(selection) or out.suffix == ".parquet"
    rows = ProofWriter(out, whole=not selection) if out.suffix == ".parquet" else None
    with contextlib.ExitStack() as stack:
        f = stack.enter_context(out.open("wb")) if rows is None else None
        if rows is not None:
            stack.callback(rows.close)
        for r in read_all(bootstrap, topics.RECEIPTS, since_ms=selection.since_ms, until_ms=selection.until_ms):
            lines = (r.value or b"").split(b"\n")
            if as_proofs:
                segment = read_lines(lines, f"{topics.RECEIPTS}[{r.partition}]@{r.offset}")
                for checkpoint in segment.checkpoints:  # one a segment
                    for proof in proofs_of(segment.receipts, checkpoint):
                        if selection.keeps(proof.receipt):
                            if rows is not None:
                                rows.write(proof)
                            else:
                                assert f is not None
                                f.write(proof.to_line() + b"\n")
                            receipts += 1
            else:
                assert f is not None
                f.write(b"\n".join(lines) + b"\n")
                receipts, checkpoints = receipts + len(lines) - 1, checkpoints + 1
            if r.offset % 1000 == 0:
                progress(f"{topics.RECEIPTS}[{r.partition}]@{r.offset}: {receipts:,} receipts written")
    return receipts, checkpoints


def read_receipts(bootstrap: KafkaTarget, since_ms: int | None = None) -> ReceiptLog:
    return parse(read_all(bootstrap, topics.RECEIPTS, since_ms=since_ms))


@dataclass(frozen=True, slots=True)
class Certified:
    #: records (decisions, results) with no receipt: action id -> count
    uncertified: dict[str, int] = field(default_factory=dict)
    #: records with more than one receipt: action id -> receipts
    doubled: dict[str, int] = field(default_factory=dict)
    #: receipts whose record its topic does not hold (removed, compacted past, never written): action id -> count
    phantoms: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.uncertified or self.doubled or self.phantoms)

    def summary(self) -> str:
        def first(found: dict[str, int]) -> str:
            return ", ".join(sorted(found)[:3]) or "-"
        return (f"records without a receipt {len(self.uncertified)} (e.g. {first(self.uncertified)}); "
                f"records with two or more {len(self.doubled)} (e.g. {first(self.doubled)}); "
                f"receipts of no record {len(self.phantoms)} (e.g. {first(self.phantoms)})")


def decision_hashes(records: Iterable[Record], codec: Codec) -> dict[str, str]:
    """record sha256 -> its action id, for each decision record given."""
    out: dict[str, str] = {}
    for r in records:
        if r.value is not None:
            out[sha256_hex(r.value)] = str(codec.decode(r.value, expect="ActionDecision")[1]["request"]["action_id"])
    return out


def final_result_hashes(records: Iterable[Record], codec: Codec) -> dict[str, str]:
    """record sha256 -> its action id, for each final result given (an intent certifies
    nothing: compaction may remove it)."""
    out: dict[str, str] = {}
    for r in records:
        if r.value is not None:
            result = codec.decode(r.value, expect="ActionResult")[1]
            if Status(result["status"]).final:
                out[sha256_hex(r.value)] = str(result["action_id"])
    return out


@dataclass(frozen=True, slots=True)
class Checked:
    decisions: Certified
    outcomes: Certified
    #: receipts of each kind checked
    receipts: dict[Kind, int]

    @property
    def ok(self) -> bool:
        return self.decisions.ok and self.outcomes.ok


def check(bootstrap: KafkaTarget, since_ms: int, progress: Callable[[str], None],
          tenant: str | None = None) -> Checked:
    """Online, what offline verification cannot see: the receipts written since ``since_ms``
    held against the records they certify (decisions, executors' final results), each way. A
    record written since then without exactly one receipt; a receipt whose record is not on its
    topic (removed, compacted past, or never written). ``tenant``: that tenant's alone (a
    result names no tenant: its action's decision does)."""
    codec = Codec()
    progress(f"reading {topics.RECEIPTS}")
    receipts = [r for r in read_receipts(bootstrap, since_ms=since_ms).receipts
                if tenant is None or r.tenant == tenant]
    by_kind = {kind: [r for r in receipts if r.kind is kind] for kind in Kind}
    # a receipt's segment is written after its records, in their transaction: records are read
    # from a little earlier, so none certified by a receipt read is missed
    from_ms = max(since_ms - SLACK_MS, 0)
    decided: dict[str, str] = {}
    decisions_due: set[str] = set()
    ours: set[str] = set()
    for name in DECISION_TOPICS:
        progress(f"reading {name}")
        for r in read_all(bootstrap, name, since_ms=from_ms):
            if r.value is None:
                continue
            request = codec.decode(r.value, expect="ActionDecision")[1]["request"]
            digest, action_id = sha256_hex(r.value), str(request["action_id"])
            if tenant is None or (request.get("tenant") or DEFAULT_TENANT) == tenant:
                decided[digest] = action_id
                ours.add(action_id)
                if r.timestamp_ms >= since_ms:
                    decisions_due.add(digest)
    progress(f"reading {topics.RESULTS}")
    results: dict[str, str] = {}
    results_due: set[str] = set()
    for r in read_all(bootstrap, topics.RESULTS, since_ms=from_ms):
        for digest, action_id in final_result_hashes([r], codec).items():
            results[digest] = action_id
            if r.timestamp_ms >= since_ms and action_id in ours:
                results_due.add(digest)
    return Checked(certify(by_kind[Kind.DECISION], decided, decisions_due),
                   certify(by_kind[Kind.OUTCOME], results, results_due),
                   {kind: len(found) for kind, found in by_kind.items()})


def certify(receipts: Iterable[Receipt], records: Mapping[str, str], due: Collection[str] | None = None) -> Certified:
    """``records``: the sha256 of each record written (decisions, or final results) -> its
    action id. Each of ``due`` (all of them by default) must have exactly one receipt, and every
    receipt one of ``records``."""
    count: dict[str, int] = defaultdict(int)
    by_hash: dict[str, str] = {}
    for r in receipts:
        count[r.record_sha256] += 1
        by_hash[r.record_sha256] = r.action_id
    uncertified = {records[d]: 1 for d in (records if due is None else due) if count.get(d, 0) == 0}
    doubled = {records[d]: n for d, n in count.items() if n > 1 and d in records}
    phantoms = {by_hash[d]: n for d, n in count.items() if d not in records}
    return Certified(uncertified, doubled, phantoms)
