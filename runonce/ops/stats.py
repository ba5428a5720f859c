"""``runonce stats``: what happened, counted from the topics."""

from __future__ import annotations

from collections import Counter

from runonce.core.decision import Outcome
from runonce.errors import InvalidInput
from runonce.kafka import topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.wire.codec import Codec
from runonce.wire.headers import H_ERROR_TYPE
from runonce.wire.results import Status


def collect(bootstrap: KafkaTarget) -> dict[str, Counter[tuple[str, ...]]]:
    codec = Codec()
    counts: dict[str, Counter[tuple[str, ...]]] = {"decisions": Counter(), "unkeyed": Counter(),
                                                   "results": Counter(), "dlq": Counter(),
                                                   "unreadable": Counter()}
    seen: set[tuple[int, int]] = set()  # a re-emitted decision counts once
    for topic in (topics.APPROVED, topics.DROPPED):
        for r in read_all(bootstrap, topic):
            try:
                _, d = codec.decode(r.value, expect="ActionDecision")
            except InvalidInput:
                counts["unreadable"][(topic,)] += 1
                continue
            pos = (d["source_partition"], d["source_offset"])
            if pos in seen:
                continue
            seen.add(pos)
            tool = d["request"]["tool"]
            counts["decisions"][(tool, d["outcome"], d["reason"])] += 1
            if d["unkeyed"]:
                counts["unkeyed"][(tool,)] += 1
    latest: dict[str, tuple[str, str]] = {}
    for r in read_all(bootstrap, topics.RESULTS):
        if r.value is None:
            continue
        try:
            _, res = codec.decode(r.value, expect="ActionResult")
        except InvalidInput:
            counts["unreadable"][(topics.RESULTS,)] += 1
            continue
        latest[res["action_id"]] = (res["tool"], res["status"])
    for tool, status in latest.values():
        counts["results"][(tool, status)] += 1
    for r in read_all(bootstrap, topics.DLQ):
        kind = r.header(H_ERROR_TYPE)
        counts["dlq"][(kind.decode() if kind else "?",)] += 1
    return counts


def stats_table(bootstrap: KafkaTarget) -> str:
    counts = collect(bootstrap)
    rows = [f"{'tool':<26}{'outcome':<10}{'reason':<22}{'count':>7}"]
    for (tool, outcome, reason), n in sorted(counts["decisions"].items()):
        rows.append(f"{tool:<26}{outcome:<10}{reason:<22}{n:>7}")
    total = sum(counts["decisions"].values())
    approved = sum(n for (_, o, _), n in counts["decisions"].items() if o == Outcome.APPROVE.value)
    rows.append(f"decided {total}: approved {approved}, dropped {total - approved}; "
                f"unkeyed {sum(counts['unkeyed'].values())}; dead-lettered {sum(counts['dlq'].values())}")
    if counts["unreadable"]:
        rows.append("unreadable records (not ActionDecision): " + ", ".join(
            f"{t}={n}" for (t,), n in sorted(counts["unreadable"].items())))
    if counts["results"]:
        rows.append("executor results: " + ", ".join(f"{t}/{s}={n}" for (t, s), n in sorted(counts["results"].items())))
    in_doubt = sum(n for (_, s), n in counts["results"].items() if s == Status.IN_DOUBT.value)
    rows.append(f"in_doubt {in_doubt}")
    return "\n".join(rows)
