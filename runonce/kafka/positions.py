"""Where a consumer of runonce's (an executor, the transactional stream worker) starts reading
each partition it is assigned: decided here, never by the Kafka client. ``auto.offset.reset``
is "error", so the client cannot pick a position of its own; this module turns the group's
committed offsets into explicit ones.

- a committed offset: start there, always;
- no committed offset (the group is new on this partition): the start policy decides,
  the earliest approved record (the default) or the end (``--from-end``), and the decision
  is logged and committed so that no later owner decides again;
- an offset that could not be fetched: unknown, which is an exit for a restart.

After an aborted transaction the consumer goes back (``rewind``): to the committed offset, or
to the start it decided itself when the group has committed nothing there yet.

``start_positions`` and ``rewind_positions`` are pure, so every case is a unit test;
``explicit_starts`` and ``rewind`` ask a consumer for what they need (committed offsets, read
stably under read_committed, and the log's bounds where nothing is committed) and apply it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from runonce.errors import FatalError

#: librdkafka's "no committed offset" (OFFSET_INVALID)
NO_OFFSET = -1001


class StartPolicy(enum.Enum):
    EARLIEST = "earliest"
    END = "end"


class UnknownPosition(FatalError):
    """A partition's committed offset could not be read: starting anywhere would be a guess."""


@dataclass(frozen=True, slots=True)
class Committed:
    """What the group coordinator answered for one partition."""

    partition: int
    offset: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Start:
    partition: int
    offset: int
    #: True when no committed offset existed and the policy chose ``offset`` (commit it)
    decided: bool
    why: str


def needs_watermarks(committed: Sequence[Committed]) -> list[int]:
    """Partitions without a committed offset: only these need the log's bounds."""
    check(committed)
    return [c.partition for c in committed if c.offset < 0]


def check(committed: Sequence[Committed]) -> None:
    unknown = [c for c in committed if c.error is not None or (c.offset < 0 and c.offset != NO_OFFSET)]
    if unknown:
        raise UnknownPosition("committed offsets unknown for " + ", ".join(
            f"partition {c.partition} ({c.error or f'offset {c.offset}'})" for c in unknown))


def start_positions(committed: Sequence[Committed], watermarks: Mapping[int, tuple[int, int]],
                    policy: StartPolicy) -> list[Start]:
    """One explicit start per partition. ``watermarks`` maps a partition without a committed
    offset to its (low, high) offsets."""
    check(committed)
    starts = []
    for c in committed:
        if c.offset >= 0:
            starts.append(Start(c.partition, c.offset, False, f"committed offset {c.offset}"))
            continue
        if c.partition not in watermarks:
            raise UnknownPosition(f"partition {c.partition} has no committed offset and its bounds are unknown")
        low, high = watermarks[c.partition]
        if policy is StartPolicy.EARLIEST:
            starts.append(Start(c.partition, low, True, f"new group: earliest record, offset {low}"))
        else:
            starts.append(Start(c.partition, high, True, f"new group: --from-end, offset {high}"))
    return starts


def rewind_positions(committed: Sequence[Committed], decided: Mapping[int, int]) -> list[Start]:
    """Where to go back to after an abort. ``decided`` maps a partition this consumer started
    by its policy to that start, which is used while nothing is committed there (such a
    ``Start`` has ``decided=True``: still to be made durable). Anything else is unknown: without
    a seek the consumer would go on past the aborted records, and "offset 0" once re-read all
    of actions.approved and performed actions approved before the group began."""
    check(committed)
    out = []
    for c in committed:
        if c.offset >= 0:
            out.append(Start(c.partition, c.offset, False, f"committed offset {c.offset}"))
        elif c.partition in decided:
            out.append(Start(c.partition, decided[c.partition], True, "the start it was given, not yet committed"))
        else:
            raise UnknownPosition(f"partition {c.partition}: no committed offset and no start decided here")
    return out


def _committed(consumer: Any, partitions: Sequence[Any], who: str, timeout_s: float, doing: str
               ) -> dict[str, list[Committed]]:
    from confluent_kafka import KafkaException

    try:
        answered = consumer.committed(list(partitions), timeout=timeout_s)
    except KafkaException as exc:
        raise UnknownPosition(f"{who}: {doing}: cannot fetch the group's committed offsets: {exc}") from exc
    by_topic: dict[str, list[Committed]] = {}
    for tp in answered:
        by_topic.setdefault(tp.topic, []).append(
            Committed(tp.partition, tp.offset, str(tp.error) if tp.error is not None else None))
    return by_topic


def rewind(consumer: Any, decided: Mapping[tuple[str, int], int], who: str,
           timeout_s: float = 10.0) -> list[tuple[str, Start]]:
    """Seek every assigned partition back (``rewind_positions``); returns (topic, start) for
    each. Raises UnknownPosition rather than leave a partition where it is."""
    from confluent_kafka import TopicPartition

    assignment = consumer.assignment()
    if not assignment:
        return []  # revoked meanwhile: the next owner starts from the committed offsets anyway
    out: list[tuple[str, Start]] = []
    for topic, committed in _committed(consumer, assignment, who, timeout_s, "rewind after an abort").items():
        mine = {p: offset for (t, p), offset in decided.items() if t == topic}
        try:
            starts = rewind_positions(committed, mine)
        except UnknownPosition as exc:
            raise UnknownPosition(f"{who}: cannot rewind {topic} after an abort: {exc}") from exc
        out.extend((topic, s) for s in starts)
    for topic, s in out:
        consumer.seek(TopicPartition(topic, s.partition, s.offset))
    return out


def explicit_starts(consumer: Any, partitions: Sequence[Any], policy: StartPolicy, who: str,
                    timeout_s: float = 10.0) -> list[tuple[str, Start]]:
    """(topic, start) for each assigned partition. Raises UnknownPosition if any lookup fails."""
    from confluent_kafka import KafkaException, TopicPartition

    out: list[tuple[str, Start]] = []
    for topic, committed in _committed(consumer, partitions, who, timeout_s, "start").items():
        watermarks = {}
        for p in needs_watermarks(committed):
            try:
                watermarks[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s,
                                                               cached=False)
            except KafkaException as exc:
                raise UnknownPosition(f"{who}: cannot read the bounds of {topic}[{p}]: {exc}") from exc
        out.extend((topic, s) for s in start_positions(committed, watermarks, policy))
    return out
