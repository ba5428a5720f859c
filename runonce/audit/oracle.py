"""The oracle: reads the topics and accounts for every requested record exactly once.

Each record of ``actions.requested`` must end in exactly one place: a decision in
``actions.approved`` or ``actions.dropped`` (matched by source partition/offset), or a
dead letter in ``actions.dlq`` (matched by origin headers). The oracle reports:

* lost        requested records with no decision and no dead letter (a held action waiting
              for a person is not lost: it is counted as ``held``, from ``actions.held``)
* conflicts   records decided two different ways (approved and dropped, or two reasons),
              each with every decision written for it and where (``decided_two_ways``)
* phantoms    decisions that point at no requested record
* doubled     action ids approved twice as *distinct* actions for one idempotency key
* re-emitted  the same decision written again for the same record (at-least-once
              redelivery; harmless because executors act once per action id, but counted)
* reasons     drop reasons per action id, to compare with what a generator planted

``runonce verify`` prints this; the crash test asserts on it; tests feed it planted faults.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from runonce.core.decision import Outcome, Reason
from runonce.errors import InvalidInput
from runonce.kafka import topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.kafka.record import Record
from runonce.wire.codec import Codec
from runonce.wire.headers import H_ERROR_TYPE, H_ORIGIN_OFFSET, H_ORIGIN_PARTITION, H_ORIGIN_TOPIC
from runonce.wire.keys import request_key

APPROVED, DROPPED = Outcome.APPROVE.value, Outcome.DROP.value
Position = tuple[int, int]  # (partition, offset) in actions.requested


@dataclass
class Report:
    requested: int = 0
    approved: int = 0
    dropped: int = 0
    dead_lettered: int = 0
    re_emitted: int = 0
    lost: list[Position] = field(default_factory=list)
    conflicts: list[Position] = field(default_factory=list)
    phantoms: list[Position] = field(default_factory=list)
    doubled_keys: list[str] = field(default_factory=list)
    #: records in approved/dropped that are not ActionDecisions (a foreign writer)
    unreadable: list[tuple[str, int, int]] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    #: action_id -> final (outcome, reason)
    outcome_by_action: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: conflict position -> each decision written for it, where, and what it repeats
    decided_two_ways: dict[Position, list[str]] = field(default_factory=dict)
    #: dead letters written more than once for one requested record
    dead_letters_repeated: int = 0
    #: action_id -> how many times its decision was written again
    re_emitted_by_action: dict[str, int] = field(default_factory=dict)
    #: requested records held for a person's approval and not decided yet
    held: list[Position] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.conflicts or self.phantoms or self.doubled_keys or self.unreadable)

    @property
    def accounted(self) -> int:
        return self.approved + self.dropped + self.dead_lettered

    def problems(self) -> list[str]:
        out = []
        for name in ("lost", "conflicts", "phantoms", "doubled_keys", "unreadable"):
            items = getattr(self, name)
            if items:
                out.append(f"{len(items)} {name.replace('_', ' ')}: {items[:5]}{' ...' if len(items) > 5 else ''}")
        return out

    def summary(self) -> str:
        lines = [
            f"requested      {self.requested}",
            f"approved       {self.approved}",
            f"dropped        {self.dropped}",
            f"dead-lettered  {self.dead_lettered}",
            f"re-emitted     {self.re_emitted}  (same decision written again after a redelivery)",
        ]
        if self.held:
            lines.insert(3, f"held           {len(self.held)}  (waiting for a person's approval)")
        for reason, count in sorted(self.reasons.items()):
            lines.append(f"  {reason:<22} {count}")
        if self.dead_letters_repeated:
            lines.append(f"dead letters written again: {self.dead_letters_repeated}")
        for pos, decisions in list(self.decided_two_ways.items())[:5]:
            lines.append(f"decided two ways: actions.requested[{pos[0]}]@{pos[1]}")
            lines.extend(f"    {d}" for d in decisions)
        lines.append("OK: every requested record accounted for exactly once" if self.ok
                     else "FAILED: " + "; ".join(self.problems()))
        return "\n".join(lines)


def account(requested: Iterable[Record], approved: Iterable[Record], dropped: Iterable[Record],
            dlq: Iterable[Record], codec: Codec | None = None, held: Iterable[Record] = (), *,
            windowed: bool = False) -> Report:
    """Pure accounting over already-read records (tests feed it planted topics). A record
    held for approval (``held``) is accounted by its release or drop; until then it is held.
    ``windowed``: the records are a time window of the topics, so a decision for a requested
    record before the window's first (on its partition) is not a phantom: it is outside."""
    codec = codec or Codec()
    report = Report()
    action_at: dict[Position, str | None] = {}
    first_at: dict[int, int] = {}
    for r in requested:
        first_at.setdefault(r.partition, r.offset)
        report.requested += 1
        try:
            _, req = codec.decode(r.value, expect="ActionRequested")
            action_at[(r.partition, r.offset)] = req["action_id"]
        except InvalidInput:
            action_at[(r.partition, r.offset)] = None
    # position -> set of distinct decisions seen for it
    seen: dict[Position, set[tuple[str, str, str]]] = defaultdict(set)
    writes: Counter[Position] = Counter()
    dead_letters: Counter[Position] = Counter()
    where: dict[Position, list[str]] = defaultdict(list)
    approved_by_key: dict[str, set[str]] = defaultdict(set)
    for r in (*approved, *dropped):
        try:
            _, d = codec.decode(r.value, expect="ActionDecision")
        except InvalidInput:
            report.unreadable.append((r.topic, r.partition, r.offset))
            continue
        pos = (d["source_partition"], d["source_offset"])
        action_id = d["request"]["action_id"]
        seen[pos].add((d["outcome"], d["reason"], action_id))
        writes[pos] += 1
        repeat = f" repeating {d['first_action_id']}" if d.get("first_action_id") else ""
        where[pos].append(f"{d['outcome']} {d['reason']} (action {action_id}{repeat}) "
                          f"at {r.topic}[{r.partition}]@{r.offset}")
        if d["outcome"] == APPROVED and d["request"]["idempotency_key"]:
            approved_by_key[request_key(d["request"])].add(action_id)  # a key is its tenant's own
    for r in dlq:
        topic = r.header(H_ORIGIN_TOPIC)
        if topic is not None and topic.decode("utf-8", "replace") != topics.REQUESTED:
            continue  # a foreign record on an internal topic: no requested record stands behind it
        part, off = r.header(H_ORIGIN_PARTITION), r.header(H_ORIGIN_OFFSET)
        if part is None or off is None:
            continue
        pos = (int(part), int(off))
        kind = r.header(H_ERROR_TYPE)
        seen[pos].add(("DLQ", kind.decode() if kind else "?", ""))
        writes[pos] += 1
        dead_letters[pos] += 1
        where[pos].append(f"DLQ {kind.decode() if kind else '?'} at {r.topic}[{r.partition}]@{r.offset}")
    for pos, decisions in seen.items():
        if pos not in action_at:
            if not windowed or pos[1] >= first_at.get(pos[0], pos[1] + 1):
                report.phantoms.append(pos)
            continue
        if len(decisions) > 1:
            report.conflicts.append(pos)
            report.decided_two_ways[pos] = where[pos]
            continue
        report.dead_letters_repeated += max(0, dead_letters[pos] - 1)
        outcome, reason, action_id = next(iter(decisions))
        report.re_emitted += writes[pos] - 1
        if writes[pos] > 1 and action_id:
            report.re_emitted_by_action[action_id] = writes[pos] - 1
        if outcome == APPROVED:
            report.approved += 1
        elif outcome == DROPPED:
            report.dropped += 1
            report.reasons[reason] += 1
        else:
            report.dead_lettered += 1
            report.reasons[f"dlq:{reason}"] += 1
        if action_id:
            report.outcome_by_action[action_id] = (outcome, reason)
    waiting = set()
    for r in held:
        try:
            _, d = codec.decode(r.value, expect="ActionDecision")
        except InvalidInput:
            report.unreadable.append((r.topic, r.partition, r.offset))
            continue
        waiting.add((d["source_partition"], d["source_offset"]))
    report.held = sorted(pos for pos in waiting if pos in action_at and pos not in seen)
    report.lost = sorted(pos for pos in action_at if pos not in seen and pos not in waiting)
    report.doubled_keys = sorted(key for key, ids in approved_by_key.items() if len(ids) > 1)
    report.phantoms.sort()
    report.conflicts.sort()
    return report


def verify(bootstrap: KafkaTarget, codec: Codec | None = None, *, since_ms: int | None = None) -> Report:
    """Read the topics to their current ends and account. ``since_ms``: only records from this
    broker time on (the time index, not a scan), for a test that accounts for its own records:
    each was requested, and so decided, after it began."""
    def read(topic: str) -> Iterable[Record]:
        return read_all(bootstrap, topic, since_ms=since_ms)

    return account(read(topics.REQUESTED), read(topics.APPROVED), read(topics.DROPPED), read(topics.DLQ), codec,
                   read(topics.HELD), windowed=since_ms is not None)


def expected_mismatches(report: Report, planted: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """action_id -> (planted reason, found reason) wherever they differ ('unique' means approved)."""
    out = {}
    for action_id, want in planted.items():
        outcome, reason = report.outcome_by_action.get(action_id, ("MISSING", "missing"))
        found = reason if outcome in (DROPPED, APPROVED) else f"{outcome}:{reason}"
        if outcome == APPROVED and reason == Reason.CONTENT_WINDOW_AUDIT.value:
            found = Reason.CONTENT_WINDOW_AUDIT.value
        if found != want:
            out[action_id] = (want, found)
    return out
