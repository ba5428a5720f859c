"""Which node coordinates a transactional id, found as Kafka finds it.

The broker maps a transactional id to a partition of ``__transaction_state`` by
``Utils.abs(transactionalId.hashCode) % partitions`` (TransactionStateManager.partitionFor);
that partition's leader is the coordinator. librdkafka exposes no DescribeTransactions,
and the broker's kafka-tools jar (TransactionsCommand) is not among the jars runonce
fetches, so the leader comes from the admin client's metadata."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

TRANSACTION_STATE = "__transaction_state"
_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31-based over UTF-16 code units, in signed 32-bit arithmetic."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def transaction_partition(transactional_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs`` maps Integer.MIN_VALUE to 0 rather than overflowing."""
    h = java_string_hash(transactional_id)
    return (0 if h == _INT_MIN else abs(h)) % partitions


def coordinators(admin: Any, transactional_ids: Iterable[str]) -> dict[str, int]:
    """transactional id -> the node id coordinating it now."""
    parts = admin.list_topics(TRANSACTION_STATE, timeout=10).topics[TRANSACTION_STATE].partitions
    return {tid: parts[transaction_partition(tid, len(parts))].leader for tid in transactional_ids}


def busiest(leaders: Iterable[int]) -> int:
    """The node that appears most often (the lowest id among equals, so a run is repeatable)."""
    counts = Counter(leaders)
    return min(counts, key=lambda node: (-counts[node], node))
