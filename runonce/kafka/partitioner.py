"""Kafka's default partitioner (murmur2, as Java, aiokafka and librdkafka's
``murmur2_random`` compute it), so every process agrees where a key lives.

The stream job relies on it: state for a key is kept by the owner of the key's
partition, and a record that arrives on another partition is re-keyed, not misjudged.
"""

from __future__ import annotations

import struct
from typing import Callable

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")
#: Kafka's seed
SEED = 0x9747B28C


def murmur2_python(data: bytes) -> int:
    """Kafka's murmur2 in Python: the SDK's, where the compiled one is not installed."""
    length = len(data)
    h = (SEED ^ length) & _MASK
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


def _compiled() -> Callable[[bytes], int] | None:
    """MurmurHash2 in Rust (the ``murmurhash2`` wheel, in the worker's extra): 30x the Python
    loop on a 72-byte content key, and the stream job hashes about two keys a decision (its
    own partition's check, a scope's owner). Kafka's murmur2 is the standard MurmurHash2 with
    Kafka's seed; tests/unit/test_partitioner.py holds both to Kafka's vectors."""
    try:
        from murmurhash2 import murmurhash2
    except ImportError:
        return None

    def murmur2_compiled(data: bytes) -> int:
        return murmurhash2(data, SEED)
    return murmur2_compiled


#: the compiled murmur2 when installed, else the Python one: one rule, two speeds
murmur2: Callable[[bytes], int] = _compiled() or murmur2_python


def partition_for(key: str | bytes, partitions: int) -> int:
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return (murmur2(raw) & 0x7FFFFFFF) % partitions
