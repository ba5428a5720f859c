"""The transaction-coordinator lookup the failover test kills by: Java's String.hashCode
and Kafka's partitionFor, against values Java itself gives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.support.coordinators import busiest, java_string_hash, transaction_partition


def test_java_string_hash_matches_java() -> None:
    # printed by Java's own String.hashCode: overflow, Integer.MIN_VALUE and a character
    # outside the BMP (two UTF-16 code units)
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("runonce-exec-payments-0") == 782589963
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("\U0001F600") == 1772899
    assert java_string_hash("runonce-exec-fo-abc123-smtp-0") == -489058163


def test_min_value_maps_to_partition_zero() -> None:
    assert transaction_partition("polygenelubricants", 6) == 0  # hashCode is Integer.MIN_VALUE


@given(st.text(max_size=40), st.integers(min_value=1, max_value=64))
def test_the_partition_is_always_in_range(tid: str, partitions: int) -> None:
    assert 0 <= transaction_partition(tid, partitions) < partitions


def test_busiest_takes_the_most_frequent_then_the_lowest_id() -> None:
    assert busiest([3, 2, 3, 1]) == 3
    assert busiest([2, 1, 2, 1]) == 1
