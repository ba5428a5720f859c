"""runonce's partitioner is Kafka's: every process (Java, librdkafka, aiokafka, runonce) must
agree where a key lives, or a record is re-keyed forever or judged by the wrong state."""

from __future__ import annotations

from typing import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runonce.kafka import partitioner
from runonce.kafka.partitioner import murmur2, murmur2_python, partition_for

#: the worker's (compiled, from its extra) and the SDK's without it
IMPLEMENTATIONS = pytest.mark.parametrize("hash_of", [murmur2, murmur2_python], ids=["in use", "python"])

#: Kafka's own vectors (clients' UtilsTest.testMurmur2), as Java's signed ints
KAFKA_VECTORS = {"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
                 "a-little-bit-longer-string": -1486304829,
                 "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, "abc": 479470107}


def _reference(data: bytes) -> int:
    """murmur2 byte by byte, as Kafka's Java code reads it."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(data)) & mask
    rounded = len(data) & ~3
    for i in range(0, rounded, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    for shift, i in ((16, 2), (8, 1)):
        if len(data) & 3 > i:
            h ^= data[rounded + i] << shift
    if len(data) & 3:
        h = ((h ^ data[rounded]) * m) & mask
    h = ((h ^ (h >> 13)) * m) & mask
    return h ^ (h >> 15)


@IMPLEMENTATIONS
def test_kafkas_own_vectors(hash_of: Callable[[bytes], int]) -> None:
    for key, signed in KAFKA_VECTORS.items():
        assert hash_of(key.encode()) == signed & 0xFFFFFFFF, key


@IMPLEMENTATIONS
@given(data=st.binary(max_size=200))
def test_agrees_with_the_byte_by_byte_reading(hash_of: Callable[[bytes], int], data: bytes) -> None:
    assert hash_of(data) == _reference(data)


def test_the_worker_hashes_with_the_compiled_murmur2() -> None:
    """The worker's extra is installed here: the stream job's two hashes a decision are Rust's."""
    assert murmur2 is not murmur2_python
    assert partitioner.murmur2.__name__ == "murmur2_compiled"


def test_a_key_lives_on_one_partition_however_given() -> None:
    assert partition_for("booking-1", 6) == partition_for(b"booking-1", 6) == (murmur2(b"booking-1") & 0x7FFFFFFF) % 6
