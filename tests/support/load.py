"""An agent producing a workload at a fixed rate, and the executors' final results: shared by
the fault tests on the session's broker and the failover test on the local cluster."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from runonce.kafka import topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.sdk.submit import Submitter
from runonce.wire.codec import Codec


class Load(threading.Thread):
    """One agent producing records in order at a fixed rate (a broker outage just queues)."""

    def __init__(self, bootstrap: KafkaTarget, records: list[dict[str, Any]], rate_per_s: float,
                 agent_id: str = "fault-agent") -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.records, self.rate_per_s, self.agent_id = bootstrap, records, rate_per_s, agent_id
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            started = time.monotonic()
            with Submitter(self.bootstrap, agent_id=self.agent_id, timeout_s=300) as sub:
                for i, record in enumerate(self.records):
                    sub.send(record)
                    ahead = i / self.rate_per_s - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
        except BaseException as exc:  # noqa: BLE001  reported by the test
            self.error = exc

    def finish(self, timeout_s: float) -> None:
        """Wait until the agent has produced every record; fail the test if it could not."""
        self.join(timeout_s)
        assert not self.is_alive(), "the agent could not produce its workload"
        assert self.error is None, f"the agent lost actions: {self.error!r}"


def final_results(bootstrap: KafkaTarget, action_ids: set[str], codec: Codec | None = None) -> dict[str, str]:
    """The latest status in actions.results of each of ``action_ids`` that has one."""
    codec = codec or Codec()
    latest: dict[str, str] = {}
    for r in read_all(bootstrap, topics.RESULTS, timeout_s=120):
        if r.value is not None and r.key is not None and r.key.decode() in action_ids:
            latest[r.key.decode()] = codec.decode(r.value, expect="ActionResult")[1]["status"]
    return latest


def approved_positions(bootstrap: KafkaTarget, group: str, partitions: int = 6) -> tuple[list[int], list[int]]:
    """An executor group's committed offsets on actions.approved, and the topic's ends, per partition."""
    return group_positions(bootstrap, group, topics.APPROVED, partitions)


def group_positions(bootstrap: KafkaTarget, group: str, topic: str, partitions: int = 6
                    ) -> tuple[list[int], list[int]]:
    """A group's committed offsets on ``topic``, and the topic's ends, per partition."""
    from confluent_kafka import Consumer, TopicPartition

    from runonce.kafka import clients

    c = Consumer({**clients.base_config(bootstrap), "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = [tp.offset for tp in c.committed(tps, timeout=10)]
        ends = [c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
    finally:
        c.close()
    return committed, ends


def describe_group(bootstrap: KafkaTarget, group: str, topic_names: tuple[str, ...], partitions: int = 6
                   ) -> list[str]:
    """Where a group stands, for a failure message: its committed offsets against each topic's
    ends (a partition behind its end names a stuck owner), its members and what each owns."""
    from runonce.kafka.topics import admin_client

    lines = []
    try:
        for topic in topic_names:
            committed, ends = group_positions(bootstrap, group, topic, partitions)
            lines.append(f"  {group} on {topic}: committed {committed} ends {ends}")
        admin = admin_client(bootstrap)  # kept: a client collected at once never completes its futures
        desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
        for m in desc.members:
            owned = sorted(f"{tp.topic}[{tp.partition}]" for tp in m.assignment.topic_partitions) if m.assignment else []
            lines.append(f"    member {m.client_id or m.member_id} owns {owned}")
        lines.append(f"    state {desc.state}, coordinator {desc.coordinator.id}")
    except Exception as exc:  # noqa: BLE001  a diagnostic must not hide the failure it explains
        lines.append(f"    (cannot describe the group: {exc!r})")
    return lines


def explain_pending(bootstrap: KafkaTarget, pending: list[str], results: dict[str, str], tool_of: dict[str, str],
                    groups_by_vendor: dict[str, str], logs: dict[str, str], partitions: int = 6) -> str:
    """Where approved actions without a final result sit in actions.approved, against each
    executor group's committed offsets, with the executors' last log lines."""
    codec = Codec()
    where: dict[str, tuple[int, int]] = {}
    for r in read_all(bootstrap, topics.APPROVED):
        if r.value is None:
            continue
        d = codec.decode(r.value, expect="ActionDecision")[1]
        if d["request"]["action_id"] in pending:
            where[d["request"]["action_id"]] = (r.partition, r.offset)
    lines = [f"{len(pending)} approved actions without a final result; by tool {dict(Counter(tool_of[a] for a in pending))}"]
    for a in pending[:8]:
        lines.append(f"  {a} {tool_of[a]} status={results.get(a)} approved at {where.get(a)}")
    for vendor, group in groups_by_vendor.items():
        lines.append(f"  {vendor}:")
        lines.extend(describe_group(bootstrap, group, (topics.APPROVED,), partitions))
    for name, tail in logs.items():
        lines.append(f"--- {name}\n{tail}")
    return "\n".join(lines)


#: tool -> the vendor whose executor performs it and whose ledger counts it, in the load tests
EXECUTED = {"charge_payment": "payments", "send_email": "smtp", "create_jira_ticket": "jira"}


@dataclass
class Accounted:
    """What the oracle and the executors' results say about a load test's records."""
    report: Any
    tool_of: dict[str, str]
    #: approved actions of an executed tool
    approved: set[str]
    #: action id -> its latest status in actions.results
    results: dict[str, str]
    #: approved actions without a final result when the time ran out
    pending: list[str]


def account_decisions(bootstrap: KafkaTarget, records: list[dict[str, Any]], families: list[Any],
                      worker_logs: Callable[[], str], timeout_s: float = 300.0, *, since_ms: int | None = None) -> Any:
    """Wait until every requested record is decided, then check nothing was lost, decided
    twice or decided against its family's plan; the oracle's report (over the topics from
    ``since_ms`` on, when given: the test's own window)."""
    from runonce.audit.oracle import verify
    from runonce.testkit.workload import check_families

    wanted = {r["action_id"] for r in records}
    deadline = time.monotonic() + timeout_s
    while True:
        report = verify(bootstrap, since_ms=since_ms)
        if wanted <= report.outcome_by_action.keys() and report.ok or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert wanted <= report.outcome_by_action.keys(), \
        f"{len(wanted - report.outcome_by_action.keys())} undecided\n{worker_logs()}"
    assert report.ok, report.summary()
    problems = check_families(families, report.outcome_by_action)
    assert not problems, f"{len(problems)} families decided against plan: {problems[:5]}"
    return report


def account_results(bootstrap: KafkaTarget, records: list[dict[str, Any]], report: Any,
                    timeout_s: float = 300.0) -> Accounted:
    """Wait until every approved action of an executed tool has a final result (or the time runs out)."""
    tool_of = {r["action_id"]: r["tool"] for r in records}
    approved = {a for a in tool_of if report.outcome_by_action[a][0] == "APPROVED" and tool_of[a] in EXECUTED}
    codec = Codec()
    deadline = time.monotonic() + timeout_s
    while True:
        results = final_results(bootstrap, approved, codec)
        pending = [a for a in approved if results.get(a) in (None, "attempting")]
        if not pending or time.monotonic() > deadline:
            return Accounted(report, tool_of, approved, results, pending)
        time.sleep(3)


def requests_per_action(requests: list[Any]) -> Counter[tuple[str, str]]:
    """The executed vendors' requests that can make an effect, by (vendor, the effect's key):
    what a vendor that deduplicates hides from its effects."""
    per: Counter[tuple[str, str]] = Counter()
    for r in requests:
        if r.path == "DATA":
            per[("smtp", r.key)] += 1
        elif r.method == "POST" and r.path == "/v1/charges":
            per[("payments", r.key)] += 1
        elif r.method == "POST" and r.path == "/rest/api/3/issue":
            labels = (json.loads(r.body or "{}").get("fields") or {}).get("labels") or [""]
            per[("jira", labels[0])] += 1
    return per


def check_effects(done: Accounted, effects: list[Any],
                  requests: list[Any]) -> tuple[Counter[str], Counter[str], int]:
    """Nothing performed twice, every success one effect, no failure, and no second request to a
    vendor that cannot deduplicate (smtp, jira's create); (statuses, effects by vendor, payments
    keys asked more than once: the same-key reconcile the protocol allows, counted)."""
    statuses = Counter(done.results[a] for a in done.approved)
    per_key = Counter((e.vendor, e.key) for e in effects)
    doubled = [k for k, n in per_key.items() if n > 1]
    assert not doubled, f"side effects performed twice: {doubled[:5]}"
    asked = requests_per_action(requests)
    asked_twice = [k for k, n in asked.items() if n > 1 and k[0] != "payments"]
    assert not asked_twice, f"a vendor without dedup asked twice for one action: {asked_twice[:5]}"
    by_vendor = Counter(vendor for vendor, _ in per_key)
    approved_by_tool = Counter(done.tool_of[a] for a in done.approved)
    succeeded_by_tool = Counter(done.tool_of[a] for a in done.approved if done.results[a] == "succeeded")
    for tool, vendor in EXECUTED.items():
        # every success is one effect; an in_doubt email may or may not have been sent, never twice
        assert succeeded_by_tool[tool] <= by_vendor[vendor] <= approved_by_tool[tool], (tool, by_vendor, statuses)
    assert statuses["failed"] == 0, statuses
    return statuses, by_vendor, sum(1 for k, n in asked.items() if n > 1 and k[0] == "payments")
