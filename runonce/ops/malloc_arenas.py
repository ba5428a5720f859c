"""glibc's malloc arenas, capped for a process whose memory is bounded by design.

glibc gives each thread that allocates its own arena (up to eight per core), and keeps what a
thread freed in its arena. An executor's RocksDB flush and compaction threads and librdkafka's
broker threads each fill one during a restore: a restore of 10 M results peaked at 212 MB with
glibc's default, 194 MB with two arenas (docs/measured.md). An operator's ``MALLOC_ARENA_MAX``
wins."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: mallopt's parameter (malloc.h)
M_ARENA_MAX = -8
#: arenas an executor allocates from
EXECUTOR_ARENAS = 2


def cap_malloc_arenas(arenas: int = EXECUTOR_ARENAS) -> bool:
    """Cap arenas created from now on (call before the process starts its threads); False when
    this is not glibc, or the operator chose (``MALLOC_ARENA_MAX``)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to cap
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
