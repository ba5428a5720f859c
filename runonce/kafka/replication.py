"""How many copies of each runonce topic a cluster keeps, and how many must acknowledge a write.

A decision, a claim in a changelog, an executor's result: each is written once and must
survive a broker's loss. With replication factor 3 and ``min.insync.replicas`` 2, a write
acknowledged by ``acks=all`` is on two brokers, and one broker can die with nothing lost and
nothing refused. A smaller cluster gets what it can hold, said aloud."""

from __future__ import annotations

from dataclasses import dataclass

from runonce.errors import ConfigError

#: what a cluster of at least three brokers gets unless told otherwise
DEFAULT_FACTOR = 3


@dataclass(frozen=True, slots=True)
class Replication:
    factor: int
    min_insync: int
    #: what the operator should know: a factor that loses data with one broker, a setting trimmed
    warnings: tuple[str, ...] = ()


def plan(brokers: int, factor: int | None = None, min_insync: int | None = None) -> Replication:
    """The replication for a cluster of ``brokers``: ``factor`` (RUNONCE_REPLICATION_FACTOR)
    defaults to 3, or the broker count when smaller; ``min_insync`` (RUNONCE_MIN_INSYNC_REPLICAS)
    to 2 when the factor is at least 3, else 1."""
    if brokers < 1:
        raise ConfigError("the cluster reports no broker")
    if factor is not None and not 1 <= factor <= brokers:
        raise ConfigError(f"replication factor {factor} needs at least {factor} brokers; the cluster has {brokers}")
    chosen = factor if factor is not None else min(DEFAULT_FACTOR, brokers)
    isr = min_insync if min_insync is not None else (2 if chosen >= 3 else 1)
    if not 1 <= isr <= chosen:
        raise ConfigError(f"min.insync.replicas {isr} must be within 1..{chosen} (the replication factor)")
    warnings: list[str] = []
    if chosen == 1:
        warnings.append(f"replication factor 1 ({brokers} broker{'s' if brokers != 1 else ''}): losing the broker "
                        f"loses actions, decisions and state; fine for development, not for production")
    elif isr == 1:
        warnings.append(f"min.insync.replicas 1 with replication factor {chosen}: an acknowledged write may sit on "
                        f"one broker only")
    if isr == chosen and chosen > 1:
        warnings.append(f"min.insync.replicas {isr} equals the replication factor: one broker down refuses writes")
    return Replication(chosen, isr, tuple(warnings))


def reassignment_hint(topic: str, have: int, want: int) -> str:
    """Kafka cannot raise a topic's replication factor in place: it takes a reassignment."""
    return (f"{topic} has replication factor {have}, the setting is {want}: Kafka changes it only by a "
            f"reassignment (kafka-reassign-partitions.sh --bootstrap-server ... --reassignment-json-file "
            f"plan.json --execute, with {want} replicas for each partition in plan.json)")
