"""An agent producing a workload at a fixed rate, and the executors' final results: shared by
the fault tests on the session's broker and the failover test on the local cluster."""

from __future__ import annotations

import threading
import time
from typing import Any

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


def final_results(bootstrap: KafkaTarget, action_ids: set[str], codec: Codec | None = None) -> dict[str, str]:
    """The latest status in actions.results of each of ``action_ids`` that has one."""
    codec = codec or Codec()
    latest: dict[str, str] = {}
    for r in read_all(bootstrap, topics.RESULTS, timeout_s=120):
        if r.value is not None and r.key is not None and r.key.decode() in action_ids:
            latest[r.key.decode()] = codec.decode(r.value, expect="ActionResult")[1]["status"]
    return latest


def explain_pending(bootstrap: KafkaTarget, pending: list[str], results: dict[str, str], tool_of: dict[str, str],
                    groups_by_vendor: dict[str, str], logs: dict[str, str], partitions: int = 6) -> str:
    """Where approved actions without a final result sit in actions.approved, against each
    executor group's committed offsets, with the executors' last log lines."""
    from collections import Counter

    from confluent_kafka import Consumer, TopicPartition

    from runonce.kafka import clients

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
        c = Consumer({**clients.base_config(bootstrap), "group.id": group})
        try:
            tps = [TopicPartition(topics.APPROVED, p) for p in range(partitions)]
            committed = [tp.offset for tp in c.committed(tps, timeout=10)]
            ends = [c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
        finally:
            c.close()
        lines.append(f"  {vendor} ({group}): committed {committed} ends {ends}")
        try:
            from runonce.kafka.topics import admin_client

            desc = admin_client(bootstrap).describe_consumer_groups([group])[group].result(timeout=10)
            for m in desc.members:
                owned = sorted(tp.partition for tp in m.assignment.topic_partitions) if m.assignment else []
                lines.append(f"    member {m.client_id or m.member_id} owns {owned}")
            lines.append(f"    state {desc.state}, coordinator {desc.coordinator.id}")
        except Exception as exc:  # noqa: BLE001  a diagnostic must not hide the failure it explains
            lines.append(f"    (cannot describe the group: {exc})")
    for name, tail in logs.items():
        lines.append(f"--- {name}\n{tail}")
    return "\n".join(lines)
