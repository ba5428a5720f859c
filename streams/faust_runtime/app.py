"""The faust-streaming runtime (``runonce worker --runtime faust``): three agents over three
RocksDB (rocksdict) tables (keys, scopes, holds), running the same ``Pipeline`` as the
default runtime.

``create_faust_app(settings)`` is the only place faust is wired; the logic lives in
``streams/processor.py`` and the decision in ``runonce/core/decide.py``.

Guarantee: at-least-once, made harmless by design. The producer (changelog and output
records) is drained and acknowledged before faust commits offsets (``drain.py`` closes
faust's own flush gap), so restored state is never *behind* the committed offset, and an
input offset is committed only as far as the pipeline has decided it (``fence.py``); records
after it are decided again, and state remembers which action claimed each key, so a
redelivered action gets the same outcome (re-emitted with the same action_id) and writes its
claim again: after a kill, the local RocksDB can hold claims its changelog never received,
and a replay makes them durable before its input is committed ("Replays write again" in
``runonce/core/decide.py``).
``RUNONCE_GUARANTEE=exactly_once`` turns on faust's transactional mode instead.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
from pathlib import Path
from typing import Any, Iterable, Mapping

import faust
from faust.types import EventT
from mode.supervisors import CrashingSupervisor

from runonce.core.policy import PolicyBook
from runonce.errors import InvariantViolation
from runonce.kafka import topics
from runonce.kafka.reader import first_committed_offset
from runonce.settings import Settings
from runonce.streams.faust_runtime import kafka_config, patches
from runonce.streams.faust_runtime.failpoints import PassOver
from runonce.streams.faust_runtime.fence import InputFence
from runonce.streams.faust_runtime.markers import FirstCommitted
from runonce.streams.faust_runtime.sink import FaustSink, SendFailureGuard
from runonce.streams.faust_runtime.stop import stop_before_ack
from runonce.streams.metrics import StreamMetrics
from runonce.streams.ports import Inbound
from runonce.streams.processor import Pipeline
from runonce.telemetry.configured import decision_spans
from runonce.wire.codec import Codec

log = logging.getLogger("runonce.streams")

APP_ID = "runonce"


class FaustTableStore:
    """StateStore over a faust Table backed by RocksDB (one rocksdict DB per partition)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    # faust's Table picks the partition from the event being processed, which is the one
    # the stage names: stage 1 re-keys first, and stage 2's input is keyed by its scope.
    def get(self, partition: int, key: bytes) -> bytes | None:
        value = self.table.get(key)
        return bytes(value) if value is not None else None

    def put(self, partition: int, key: bytes, value: bytes) -> None:
        self.table[key] = value

    def delete(self, partition: int, key: bytes) -> None:
        self.table.pop(key, None)
        # faust's RocksDB store remembers every key it touched (key -> partition) and never
        # forgets a deleted one: without this, expiry would bound the disk but not the memory.
        getattr(self.table.data, "_key_index", {}).pop(key, None)

    def scan(self, partition: int, after: bytes | None, limit: int) -> Iterable[tuple[bytes, bytes]]:
        store = self.table.data
        dbs = getattr(store, "_dbs", None)  # faust's RocksDB store keeps one DB per partition
        if dbs is None or partition not in dbs:
            return []
        db = dbs[partition]
        out: list[tuple[bytes, bytes]] = []
        for key, value in db.items(from_key=after) if after is not None else db.items():
            if key == store.offset_key or (after is not None and key == after):
                continue
            out.append((key, value))
            if len(out) >= limit:
                break
        return out


def _inbound(event: EventT[Any]) -> Inbound:
    msg = event.message
    raw = msg.headers
    headers = tuple(raw.items()) if isinstance(raw, Mapping) else tuple(raw or ())
    return Inbound(topic=msg.topic, partition=msg.partition, offset=msg.offset,
                   timestamp_ms=round(msg.timestamp * 1000), key=msg.key, value=msg.value, headers=headers)


async def _run(pipeline: Pipeline, sink: FaustSink, stream: Any, fence: InputFence,
               failpoint: str | None = None) -> None:
    """Feed the pipeline every event and send what it returns; a record it cannot finish, or
    one faust delivers past records it skipped (fence.py), stops the worker before faust
    acknowledges it (streams/faust_runtime/stop.py)."""
    kind, _, arg = (failpoint or "").partition(":")
    victim = arg.encode() if kind == "kill_after_state" else None
    pass_over = PassOver.parse(arg) if kind == "pass_over" else None
    async for event in stream.events():
        msg = event.message
        key = (msg.topic, msg.partition)
        try:
            if pass_over is not None and await pass_over.skips(msg, stream.app):
                continue
            await fence.check(key, msg.offset)
            outs = pipeline.process_all(_inbound(event))
            for out in outs:
                if victim is not None and out.topic == topics.APPROVED and victim in (out.value or b""):
                    # the state change is in the local RocksDB; its changelog record and the
                    # decision are still in faust's buffer (nothing is sent before this task yields)
                    log.warning("failpoint kill_after_state: SIGKILL")
                    os.kill(os.getpid(), signal.SIGKILL)
            for out in outs:
                await sink.send(out)
            fence.passed(key, msg.offset)
        except BaseException as exc:  # noqa: BLE001  includes cancellation mid-record
            stop_before_ack(f"could not finish {msg.topic}[{msg.partition}]@{msg.offset}: {exc!r}", exc)


class _App(faust.App):
    """faust's app without its Monitor sensor on the per-event path.

    The Monitor keeps per-event timings and counters for faust's web views, which runonce
    disables; runonce's own Prometheus metrics (streams/metrics.py) are what operators read.
    It stays reachable as ``app.monitor`` for faust's consumer, which reports offsets to it."""

    #: how recovery asks the broker whether a changelog has committed records left (markers.py)
    first_committed_offset: FirstCommitted
    #: how far each input partition may be committed (fence.py)
    runonce_fence: InputFence

    def on_init_dependencies(self) -> Any:
        dependencies = super().on_init_dependencies()
        self.sensors.remove(self.monitor)
        return dependencies


def state_dir(settings: Settings) -> Path:
    """This worker's local RocksDB tables (one directory per worker name)."""
    return settings.state_dir / settings.worker_name


def create_faust_app(settings: Settings, policies: PolicyBook | None = None,
               metrics: StreamMetrics | None = None) -> faust.App:
    policies = policies or PolicyBook.load(settings.policy_file)
    metrics = metrics or StreamMetrics()
    codec = Codec()
    n = settings.partitions
    datadir = state_dir(settings)
    datadir.mkdir(parents=True, exist_ok=True)
    access = settings.kafka_access()
    credentials = kafka_config.credentials(access)  # the deployment's client settings, for aiokafka
    app = _App(
        APP_ID,
        broker=f"kafka://{access.bootstrap}",
        broker_credentials=credentials,
        # `runonce topics create` makes every topic, changelogs included: the worker's principal
        # needs no CREATE right (see runonce/kafka/acls.toml).
        topic_allow_declare=False,
        store="rocksdb://",
        datadir=str(datadir),
        topic_partitions=n,
        key_serializer="raw",
        value_serializer="raw",
        processing_guarantee=settings.processing_guarantee,
        web_enabled=False,
        producer_acks=-1,
        # Fail over fast on one machine: a killed worker's partitions move within seconds.
        broker_session_timeout=settings.worker_session_timeout_ms / 1000,
        broker_heartbeat_interval=1.0,
        broker_commit_every=10_000,
        broker_commit_interval=1.0,
        # Throughput knobs (bench/RESULTS.md): produce requests batched for 20 ms in batches of
        # up to 512 KiB (aiokafka's 16 KiB default sends many small requests), fetches of up to
        # 2,000 records, and no drain of the stream buffer before every commit. Measured, 30 k
        # actions: 1,956-1,981/s from start with 5 ms / 16 KiB / default fetches, 2,432-2,462/s.
        producer_linger=0.02,
        producer_max_batch_size=512 * 1024,
        broker_max_poll_records=2000,
        # Room for the largest record the input topics accept (copied whole to the DLQ or rekey topic).
        producer_max_request_size=topics.MAX_RECORD_BYTES + 1024 * 1024,
        stream_wait_empty=False,
        topic_disable_leader=True,
        table_standby_replicas=0,
    )
    # A record faust cannot write must stop the worker, not be skipped (streams/faust_runtime/sink.py).
    app.sensors.add(SendFailureGuard())
    # Outputs and changelog writes are acknowledged before any offset commit (drain.py); recovery
    # reads past commit markers (markers.py); input offsets are committed at the fence (fence.py).
    patches.install()
    # Changelogs the transactional runtime wrote end in commit markers (markers.py); recovery
    # ends only where the broker, asked directly, has nothing committed left.
    app.first_committed_offset = functools.partial(first_committed_offset, access, group=APP_ID)
    # faust commits an input partition only as far as the pipeline has decided it (fence.py).
    fence = InputFence((topics.REQUESTED, topics.REKEY, topics.SCOPED, topics.APPROVALS, topics.CANCELS),
                       app.first_committed_offset)
    app.runonce_fence = fence
    rocks = {"driver": "rocksdict"}
    keys = app.Table("keys", default=None, partitions=n, key_type=bytes, value_type=bytes, options=rocks,
                     help="stage 1: dedup key -> first claim")
    scopes = app.Table("scopes", default=None, partitions=n, key_type=bytes, value_type=bytes, options=rocks,
                       help="stage 2: scope -> natural ids, content window, budget")
    # A hold lives on the partition of the event that held it (faust writes a table on the
    # current event's partition), and partition p of every input topic is one worker's: the
    # verdicts on actions.approvals p find their holds here (streams/holds.py).
    holds = app.Table("holds", default=None, partitions=n, key_type=bytes, value_type=bytes, options=rocks,
                      help="held actions: action id -> hold and its decision")
    for table, name in ((keys, topics.CHANGELOG_KEYS), (scopes, topics.CHANGELOG_SCOPES),
                        (holds, topics.CHANGELOG_HOLDS)):
        if table.changelog_topic.get_topic_name() != name:  # `runonce topics create` makes `name`
            raise InvariantViolation(f"faust names the {table.name} changelog "
                                     f"{table.changelog_topic.get_topic_name()}, runonce creates {name}")
    sink = FaustSink(app, (topics.APPROVED, topics.DROPPED, topics.DLQ, topics.REKEY, topics.SCOPED, topics.HELD,
                           topics.VERDICTS), n)
    pipeline = Pipeline(codec=codec, policies=policies, partitions=n, keys=FaustTableStore(keys), spans=decision_spans("runonce-worker", os.environ),
                        scopes=FaustTableStore(scopes), holds=FaustTableStore(holds), metrics=metrics)
    # Partitions moved: what the holds stage cached about due times is not this worker's any more.
    app.on_partitions_assigned.connect(lambda *_args, **_kwargs: pipeline.rolled_back())

    requested = app.topic(topics.REQUESTED, topics.REKEY, key_type=bytes, value_type=bytes, partitions=n)
    scoped = app.topic(topics.SCOPED, key_type=bytes, value_type=bytes, partitions=n)
    # verdicts and agents' cancels: both decided by the holds on their partition
    approvals = app.topic(topics.APPROVALS, topics.CANCELS, key_type=bytes, value_type=bytes, partitions=n)

    # A crashed agent must take the worker down (and its supervisor restart it): faust's default
    # would log the crash and keep a live worker that decides nothing.
    @app.agent(requested, name="runonce.keys", supervisor_strategy=CrashingSupervisor)
    async def decide_keys(stream: Any) -> None:
        await _run(pipeline, sink, stream, fence, settings.stream_failpoint)

    @app.agent(scoped, name="runonce.scopes", supervisor_strategy=CrashingSupervisor)
    async def decide_scopes(stream: Any) -> None:
        await _run(pipeline, sink, stream, fence, settings.stream_failpoint)

    @app.agent(approvals, name="runonce.approvals", supervisor_strategy=CrashingSupervisor)
    async def decide_verdicts(stream: Any) -> None:
        await _run(pipeline, sink, stream, fence, settings.stream_failpoint)

    return app
