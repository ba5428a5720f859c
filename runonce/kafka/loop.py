"""The one consumer loop of every process that commits in Kafka transactions: the stream
worker (streams/transactional/worker.py) and the executors (connectors/executor/executor.py).

The loop owns what is the same for both; a ``Task`` keeps only its work per batch:

- fetch what has arrived, up to the task's ``batch_limit`` (``reader.fetched``: waiting up
  to ``wait_s`` only when nothing has), or first the records the task deferred from its
  last batch;
- consumer errors, once: a position the client would have to pick (``_AUTO_OFFSET_RESET``) is
  an ``UnknownPosition``, a fatal error (its flag, or the ``_FATAL`` event) a ``FatalError``,
  end-of-partition events are dropped, the rest logged;
- idle: a consumer that lost its group coordinator for good leaves for a restart
  (group_stall.py), then the task's own idle work;
- SIGTERM: not ready at once, stop after the current batch (its transaction committed or
  aborted), then ``Task.close`` and the consumer's close; a ``Stoppable`` task is told at once;
- health (health.py): each turn, each assignment restored, each revocation, as /healthz and
  /readyz answer them;
- the transactional producer, its watchdog and the commit path (``checkpoint``).

Processing and committing stay apart as in Kafka Streams' TaskExecutor: the task decides (or
plans and performs) its batch, then commits it through its ``Checkpoint``.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from confluent_kafka import KafkaError, Message, Producer, TopicPartition

from runonce.errors import FatalError
from runonce.kafka.access import KafkaTarget
from runonce.kafka.checkpoint import Checkpoint, Step
from runonce.kafka.group_stall import GroupStall
from runonce.kafka.health import Health
from runonce.kafka.positions import UnknownPosition
from runonce.kafka.reader import fetched
from runonce.kafka.transactions import CALL_TIMEOUT_S, init_producer, transactional_config
from runonce.kafka.watchdog import Watchdog, leave_for_restart

log = logging.getLogger("runonce.kafka")

#: what a transactional call may block past its own timeout before the process exits
#: (librdkafka#5456: a coordinator that went away can block one past it)
WATCHDOG_GRACE_S = 15.0


class GroupConsumer(Protocol):
    """What the loop, its tasks and positions.py use of a confluent-kafka Consumer in a group
    (tests give fakes)."""

    def subscribe(self, topics: list[str], on_assign: Callable[..., None], on_revoke: Callable[..., None]) -> None: ...

    def consume(self, num_messages: int, timeout: float) -> list[Message]: ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    def incremental_assign(self, partitions: list[TopicPartition]) -> None: ...

    def pause(self, partitions: list[TopicPartition]) -> None: ...

    def resume(self, partitions: list[TopicPartition]) -> None: ...

    def assignment(self) -> list[TopicPartition]: ...

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]: ...

    def seek(self, partition: TopicPartition) -> None: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]: ...

    def consumer_group_metadata(self) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Processed:
    """What a task did with a batch: records committed (0 when its transaction aborted), and
    records it left for the next batch (fetched, not yet planned)."""

    committed: int
    deferred: Sequence[Message] = ()


class Task(Protocol):
    """One process's work per batch; the loop calls nothing else."""

    def batch_limit(self) -> int:
        """The most records the next batch may hold."""
        ...

    def on_assign(self, consumer: GroupConsumer, partitions: list[TopicPartition]) -> None:
        """The group gave these partitions: start each at an explicit position (``assign``, or
        ``incremental_assign`` in an incremental group, where ``partitions`` are only the new ones)."""
        ...

    def on_revoke(self, consumer: GroupConsumer, partitions: list[TopicPartition]) -> None:
        """The group took these partitions (all of them, in a classic group)."""
        ...

    def process(self, records: list[Message]) -> Processed:
        """Decide (or plan and perform) the batch and commit it."""
        ...

    def idle(self) -> None:
        """Nothing arrived: commit what waits, check what only an idle process can."""
        ...

    def close(self, failure: BaseException | None) -> None:
        """The loop is ending (``failure``: why, if it raised); the consumer closes after."""
        ...


@runtime_checkable
class Stoppable(Protocol):
    """A task that acts on a stop at once, mid-batch (the executor starts no further vendor
    call), rather than only after its batch."""

    def stopping(self) -> None:
        """Called from the SIGTERM handler, on the main thread."""
        ...


class RunsItsLoop:
    """What a task that owns its loop (``self.loop``) offers its process and its tests."""

    loop: ConsumerLoop

    def run(self) -> None:
        """Turn until stopped (SIGTERM), then close."""
        self.loop.run()

    def step(self) -> int:
        """One turn of the loop; returns the records committed."""
        return self.loop.turn()


class ConsumerLoop:
    def __init__(self, name: str, consumer: GroupConsumer, task: Task, topics: Sequence[str], *, wait_s: float,
                 group_stall: GroupStall | None = None, health: Health | None = None,
                 incremental: bool = False) -> None:
        """``incremental``: the group hands partitions over one by one (KIP-848): a revocation
        takes only some, and the process keeps working on the rest."""
        self.name = name
        self.incremental = incremental
        self.consumer = consumer
        self.task = task
        self.topics = list(topics)
        self.wait_s = wait_s
        self.group_stall = group_stall
        #: what /healthz and /readyz answer (health.py); the process's own, or one of the loop's
        self.health = health or Health(name)
        self.deferred: list[Message] = []
        self.running = True

    def run(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        # the task built its checkpoint, and so initialised its transactional producer, before
        # its loop runs (transactional_checkpoint)
        self.health.started()
        self.consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        failure: BaseException | None = None
        try:
            while self.running:
                self.turn()
        except BaseException as exc:
            failure = exc
            raise
        finally:
            try:
                self.task.close(failure)
            finally:
                self.consumer.close()

    def stop(self) -> None:
        """Stop after the current batch; not ready from now on."""
        self.running = False
        self.health.stopping()
        if isinstance(self.task, Stoppable):
            self.task.stopping()

    def turn(self) -> int:
        """One batch, or one idle turn; returns the records committed."""
        self.health.turned()
        msgs, self.deferred = (self.deferred, []) if self.deferred else (
            fetched(self.consumer, self.wait_s, self.task.batch_limit()), [])
        records = self.records(msgs)
        if not records:
            lost = self.group_stall.check() if self.group_stall is not None else None
            if lost is not None:
                leave_for_restart(f"{self.name}: {lost}")
            self.task.idle()
            return 0
        done = self.task.process(records)
        self.deferred = list(done.deferred)
        return done.committed

    def records(self, msgs: list[Message]) -> list[Message]:
        """The records among what was fetched; each consumer error handled here, once."""
        records = []
        for msg in msgs:
            err = msg.error()
            if err is None:
                records.append(msg)
            elif err.code() == KafkaError._AUTO_OFFSET_RESET:
                # the fetch position is not in the log (out of range): never let the client move us
                raise UnknownPosition(f"{self.name}: {msg.topic()}[{msg.partition()}]: {err.str()}")
            elif err.fatal() or err.code() == KafkaError._FATAL:
                # librdkafka hands a fatal error over as an event of code _FATAL whose own flag
                # may be unset (a static member fenced by a newer instance of its slot: the
                # consumer will never fetch again); staying would hold the slot and do nothing
                raise FatalError(f"{self.name}: consumer: {err}")
            elif err.code() != KafkaError._PARTITION_EOF:
                log.warning("%s: consumer: %s", self.name, err)
        return records

    def _on_assign(self, consumer: GroupConsumer, partitions: list[TopicPartition]) -> None:
        self.health.restoring()
        self.task.on_assign(consumer, partitions)  # restores each partition's state before it returns
        self.health.assigned()

    def _on_revoke(self, consumer: GroupConsumer, partitions: list[TopicPartition]) -> None:
        if not self.incremental:  # a classic rebalance took everything; the next assignment follows
            self.health.revoked()
        # records fetched from partitions that may be another's now come again to their next
        # owner; those of partitions kept stay (the consumer's position is past them)
        taken = {(tp.topic, tp.partition) for tp in partitions}
        self.deferred = [m for m in self.deferred if (m.topic(), m.partition()) not in taken]
        self.task.on_revoke(consumer, partitions)


def transactional_checkpoint(access: KafkaTarget, transactional_id: str, consumer: GroupConsumer, *,
                             transaction_timeout_ms: int, producer_config: Mapping[str, Any] | None = None,
                             new_producer: Callable[[], Producer] | None = None, watchdog: Watchdog | None = None,
                             on_step: Callable[[Step, float], None] | None = None) -> Checkpoint:
    """The commit path of a process with this transactional id: its producer (the broker
    aborts a transaction open past ``transaction_timeout_ms``), its watchdog (a transactional
    call blocked past its own timeout is an exit for a restart, never a process that holds
    partitions and commits nothing), the consumer's group metadata (KIP-447 fencing).
    ``new_producer``/``watchdog``: tests' fakes."""
    config = transactional_config(access, transactional_id, **{
        **(producer_config or {}), "transaction.timeout.ms": transaction_timeout_ms})
    return Checkpoint(transactional_id, new_producer or (lambda: init_producer(config, transactional_id)),
                      consumer.consumer_group_metadata,
                      watchdog or Watchdog(transactional_id, CALL_TIMEOUT_S + WATCHDOG_GRACE_S),
                      transaction_timeout_s=transaction_timeout_ms / 1000, on_step=on_step)
