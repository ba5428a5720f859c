"""Kafka's default partitioner (murmur2, as Java, aiokafka and librdkafka's
``murmur2_random`` compute it), so every process agrees where a key lives.

The stream job relies on it: state for a key is kept by the owner of the key's
partition, and a record that arrives on another partition is re-keyed, not misjudged.
"""

from __future__ import annotations

import struct

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    rounded = length & ~3
    # little-endian 4-byte words, unpacked in C (this runs for every record the job decides)
    for (k,) in _WORDS.iter_unpack(memoryview(data)[:rounded]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    extra = length & 3
    if extra == 3:
        h ^= data[rounded + 2] << 16
    if extra >= 2:
        h ^= data[rounded + 1] << 8
    if extra >= 1:
        h ^= data[rounded]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for(key: str | bytes, partitions: int) -> int:
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return (murmur2(raw) & 0x7FFFFFFF) % partitions
