"""Every topic runonce uses: its name, its configs, and idempotent creation.

One place for names so the stream job, executors, SDK, CLI and tests agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from runonce.core.limits import MAX_OUTPUT_BYTES
from runonce.errors import BrokerUnavailable, ConfigError
from runonce.kafka import replication
from runonce.kafka.access import KafkaTarget
from runonce.kafka.clients import base_config, metadata, translate

REQUESTED = "actions.requested"
APPROVED = "actions.approved"
DROPPED = "actions.dropped"
RESULTS = "actions.results"
DLQ = "actions.dlq"
#: actions waiting for a person's approval (ActionDecision, outcome HELD); approvers read it
HELD = "actions.held"
#: approvers' verdicts (ApprovalVerdict), on the partition their held record names
APPROVALS = "actions.approvals"
#: agents' cancels of their own held actions (ActionCancel), on the partition their held record
#: names: a topic of their own, so that an agent that may cancel may not approve
CANCELS = "actions.cancels"
#: what each verdict, cancel (or expiry) did to its hold (VerdictDecided)
VERDICTS = "actions.verdicts"
#: a receipt for each decision, chained per partition, and the signed checkpoints over them
#: (runonce/receipts): what an auditor verifies offline
RECEIPTS = "actions.receipts"
#: internal: stage 1 re-keys records whose Kafka partition is not their idempotency key's
REKEY = "runonce.internal.rekey"
#: internal: stage 1 hands actions with scope rules to stage 2, keyed by the policy's scope
SCOPED = "runonce.internal.scoped"
#: the stream job's state changelogs (faust names them <app id>-<table>-changelog). Created here,
#: with the other topics, so a worker never starts before its changelog exists.
CHANGELOG_KEYS = "runonce-keys-changelog"
CHANGELOG_SCOPES = "runonce-scopes-changelog"
CHANGELOG_HOLDS = "runonce-holds-changelog"


#: the largest record actions.requested accepts (the broker refuses bigger ones at produce time,
#: a clear error for the agent); the topics a record is copied to whole accept it plus headers
MAX_RECORD_BYTES = 8 * 1024 * 1024
_COPY_LIMIT = str(MAX_RECORD_BYTES + 64 * 1024)
#: what a decision, a hand-off or a state record may take (core/limits.py bounds every input so
#: that each fits); said explicitly rather than left to the broker's default
_OUTPUT_LIMIT = str(MAX_OUTPUT_BYTES)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    doc: str
    configs: Mapping[str, str] = field(default_factory=dict)


_WEEK_MS = str(7 * 24 * 3600 * 1000)

_T = TypeVar("_T")
#: how often an admin request is sent again after the client dropped its connection
DROPPED_CONNECTION_ATTEMPTS = 3

TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(REQUESTED, "intended actions from agents",
              # LogAppendTime: windows run on the broker's clock, so an agent with a skewed
              # clock cannot open a window early, and a replay sees the same timestamps.
              {"message.timestamp.type": "LogAppendTime", "retention.ms": _WEEK_MS,
               "max.message.bytes": str(MAX_RECORD_BYTES)}),
    TopicSpec(APPROVED, "unique actions, for the executors",
              {"retention.ms": _WEEK_MS, "max.message.bytes": _OUTPUT_LIMIT}),
    TopicSpec(DROPPED, "every drop with its reason and the action it repeats; analysts read it",
              {"retention.ms": str(30 * 24 * 3600 * 1000), "max.message.bytes": _OUTPUT_LIMIT}),
    # Compacted by action id: the latest status of each action (attempting -> succeeded)
    # is what the SDK and a restarted executor need; history is not. Deleted after 30 days:
    # the approved record of such a result (kept a week) can never be delivered again, and a
    # key's repeats come within its TTL (24 h by default), so nothing reads it any more.
    TopicSpec(RESULTS, "executor outcomes, keyed by action id",
              {"cleanup.policy": "compact,delete", "retention.ms": str(30 * 24 * 3600 * 1000),
               "min.compaction.lag.ms": "3600000", "max.message.bytes": _OUTPUT_LIMIT}),
    TopicSpec(DLQ, "undecodable or invalid input; the reason and origin are in headers",
              {"retention.ms": str(30 * 24 * 3600 * 1000), "max.message.bytes": _COPY_LIMIT}),
    TopicSpec(HELD, "actions waiting for a person's approval, with why and until when",
              {"retention.ms": str(30 * 24 * 3600 * 1000), "max.message.bytes": _OUTPUT_LIMIT}),
    # LogAppendTime: a verdict's time (is it before the hold's expiry?) is the broker's, as a request's is.
    TopicSpec(APPROVALS, "approvers' verdicts, on the held action's partition",
              {"message.timestamp.type": "LogAppendTime", "retention.ms": _WEEK_MS,
               "max.message.bytes": str(1024 * 1024)}),
    # LogAppendTime, as a verdict's: is the cancel before the hold's expiry, on the broker's clock
    TopicSpec(CANCELS, "agents' cancels of their own held actions, on the held action's partition",
              {"message.timestamp.type": "LogAppendTime", "retention.ms": _WEEK_MS,
               "max.message.bytes": str(1024 * 1024)}),
    TopicSpec(VERDICTS, "what each verdict, cancel or expiry did to its held action",
              {"retention.ms": str(30 * 24 * 3600 * 1000), "max.message.bytes": str(1024 * 1024)}),
    # Never compacted, kept for a year (a deployment's auditors may ask for longer: its retention
    # is theirs to set); a chain cut short by retention is a gap its export says began there.
    TopicSpec(RECEIPTS, "receipts of decisions, chained per partition, with their signed checkpoints",
              {"cleanup.policy": "delete", "retention.ms": str(365 * 24 * 3600 * 1000),
               "max.message.bytes": str(1024 * 1024)}),
    TopicSpec(REKEY, "internal: records re-keyed by idempotency key",
              {"retention.ms": _WEEK_MS, "max.message.bytes": _COPY_LIMIT}),
    TopicSpec(SCOPED, "internal: stage-1 passes keyed by the policy's scope",
              {"retention.ms": _WEEK_MS, "max.message.bytes": _OUTPUT_LIMIT}),
    # Compacted: the latest state per key; expired entries leave tombstones, which compaction drops.
    TopicSpec(CHANGELOG_KEYS, "internal: stage-1 state (dedup key -> first claim)",
              {"cleanup.policy": "compact", "max.message.bytes": _OUTPUT_LIMIT}),
    TopicSpec(CHANGELOG_SCOPES, "internal: stage-2 state (scope -> claims)",
              {"cleanup.policy": "compact", "max.message.bytes": _OUTPUT_LIMIT}),
    TopicSpec(CHANGELOG_HOLDS, "internal: held actions (action id -> hold and its decision)",
              {"cleanup.policy": "compact", "max.message.bytes": _OUTPUT_LIMIT}),
)


def admin_client(bootstrap: KafkaTarget) -> AdminClient:
    return AdminClient(base_config(bootstrap))


def partition_count(bootstrap: KafkaTarget, topic: str, timeout_s: float = 10.0) -> int:
    """How many partitions ``topic`` has (BrokerUnavailable if it does not exist)."""
    try:
        meta = metadata(admin_client(bootstrap), timeout_s, topic).topics.get(topic)
    except KafkaException as exc:
        raise translate(exc, f"cannot describe {topic} at {bootstrap}") from exc
    if meta is None or meta.error is not None or not meta.partitions:
        raise BrokerUnavailable(f"topic {topic} does not exist at {bootstrap} (runonce topics create)")
    return len(meta.partitions)


def create_topics(bootstrap: KafkaTarget, partitions: int, timeout_s: float = 30.0, *,
                  replication_factor: int | None = None, min_insync_replicas: int | None = None,
                  say: Callable[[str], None] = lambda _msg: None) -> dict[str, str]:
    """Create the missing topics and bring existing ones to runonce's configs; return
    {name: "created" | "exists" | "updated" | "under-replicated"}.

    Replication follows ``replication.plan`` for the cluster's size (3 copies and 2 in sync
    where it has 3 brokers); ``say`` hears its warnings, and, for a topic with fewer copies
    than the setting, the reassignment Kafka needs to fix it (``min.insync.replicas`` it fixes).

    Raises ConfigError if a topic exists with another partition count: co-partitioning
    of the stages (and of faust's changelogs) depends on every topic having the same.
    """
    admin = admin_client(bootstrap)
    try:
        meta = metadata(admin, timeout_s)
    except KafkaException as exc:
        raise translate(exc, f"cannot reach Kafka at {bootstrap}") from exc
    existing = meta.topics
    replicas = replication.plan(len(meta.brokers), replication_factor, min_insync_replicas)
    for warning in replicas.warnings:
        say(f"warning: {warning}")
    outcome: dict[str, str] = {}
    wanted = []
    for spec in TOPICS:
        configs = {**spec.configs, "min.insync.replicas": str(replicas.min_insync)}
        if spec.name in existing:
            have = len(existing[spec.name].partitions)
            if have != partitions:
                raise ConfigError(f"topic {spec.name} has {have} partitions, expected {partitions}; "
                                  f"every runonce topic must have the same count")
            copies = min(len(p.replicas) for p in existing[spec.name].partitions.values())
            updated = _reconcile(admin, TopicSpec(spec.name, spec.doc, configs), timeout_s)
            if copies < replicas.factor:
                say(replication.reassignment_hint(spec.name, copies, replicas.factor))
                outcome[spec.name] = "under-replicated"
            else:
                outcome[spec.name] = "updated" if updated else "exists"
        else:
            wanted.append(NewTopic(spec.name, num_partitions=partitions, replication_factor=replicas.factor,
                                   config=configs))
    pending = list(wanted)
    for attempt in range(DROPPED_CONNECTION_ATTEMPTS):
        if not pending:
            break
        again = []
        by_name = {t.topic: t for t in pending}
        for name, fut in admin.create_topics(pending, operation_timeout=timeout_s).items():
            try:
                fut.result()
                outcome[name] = "created"
            except KafkaException as exc:
                code = exc.args[0].code() if exc.args else None
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    outcome[name] = "exists"  # a concurrent creator won (or our own first attempt did)
                elif dropped_connection(exc) and attempt < DROPPED_CONNECTION_ATTEMPTS - 1:
                    again.append(by_name[name])
                else:
                    raise translate(exc, f"cannot create topic {name}") from exc
        pending = again
    if wanted:
        _wait_for_leaders(admin, [t.topic for t in wanted], timeout_s)
    return outcome


def _reconcile(admin: AdminClient, spec: TopicSpec, timeout_s: float) -> bool:
    """Set the spec's configs a topic lacks (a home created by an older runonce); True if any changed."""
    if not spec.configs:
        return False
    resource = ConfigResource(ConfigResource.Type.TOPIC, spec.name)
    try:
        current = asked_again(
            lambda: admin.describe_configs([resource], request_timeout=timeout_s)[resource].result())
        stale = {k: v for k, v in spec.configs.items() if k not in current or current[k].value != v}
        if not stale:
            return False
        change = ConfigResource(ConfigResource.Type.TOPIC, spec.name, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in stale.items()])
        # SET is idempotent: sending it again after a dropped connection cannot change it twice
        asked_again(lambda: admin.incremental_alter_configs([change], request_timeout=timeout_s)[change].result())
    except KafkaException as exc:
        raise translate(exc, f"cannot bring topic {spec.name} to its configs") from exc
    return True


def dropped_connection(exc: KafkaException) -> bool:
    """True when the client dropped the connection a request went out on: on a multi-broker
    bootstrap, a new client swaps its bootstrap connections for the brokers it learns, and a
    request in flight on one of them fails with _DESTROY_BROKER. Nothing reached a decision."""
    return bool(exc.args) and exc.args[0].code() == KafkaError._DESTROY_BROKER


def asked_again(request: Callable[[], _T], attempts: int = DROPPED_CONNECTION_ATTEMPTS) -> _T:
    """An idempotent admin request, sent again while the client drops its connection."""
    for attempt in range(1, attempts + 1):
        try:
            return request()
        except KafkaException as exc:
            if not dropped_connection(exc) or attempt == attempts:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _wait_for_leaders(admin: AdminClient, names: list[str], timeout_s: float) -> None:
    """A created topic answers NOT_LEADER for a moment; return once every partition has a leader."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        meta = metadata(admin, timeout_s).topics
        leaderless = [n for n in names if n not in meta or meta[n].error is not None
                      or any(p.leader < 0 for p in meta[n].partitions.values())]
        if not leaderless:
            return
        if time.monotonic() > deadline:
            raise BrokerUnavailable(f"topics without a leader after {timeout_s:.0f} s: {leaderless}")
        time.sleep(0.2)
