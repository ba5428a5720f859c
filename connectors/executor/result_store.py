"""An executor's memory of results, on disk: one RocksDB per executor slot, beside its slot
(``RUNONCE_HOME/state/executors/<group>-<slot>``). ``actions.results`` is its changelog: every
entry came from a committed ``ActionResult``, and each write batch carries, per results
partition, the offset the store is complete up to. A restart over an intact folder reads only
the results after those offsets (results.py).

What it answers (batch.py plans with it):

- ``result(action_id)``: the latest committed result (``attempting`` included) of an action;
- ``first_user(vendor_key)``: the action that first used a vendor key, within the key window.
  A key's first user older than the window is no answer: the stream job approves a key again
  after its TTL, on purpose, and the executor must perform that action, not block it.

Entries are removed by time (``prune``), through a time index kept in the same batches, so
the store stays bounded by the key window as the topic's reading is.

Layout (raw bytes): ``\\x00o`` + partition -> next offset; ``a`` + action id -> result;
``k`` + vendor key -> action id; ``t`` + time + action id -> vendor key. The ``\\x00`` prefix
sorts the offsets before every entry."""

from __future__ import annotations

import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from rocksdict import BlockBasedIndexType, BlockBasedOptions, Cache, Options, Rdict, WriteBatch

from runonce.errors import FatalError
from runonce.wire.results import Result, Status

#: RocksDB's write memory: at most two memtables of this (its default is 64 MB each)
MEMTABLE_BYTES = 16 * 1024 * 1024
#: RocksDB's block cache: data, index and filter blocks (its default is 32 MB, data only)
CACHE_BYTES = 32 * 1024 * 1024

_OFFSET = b"\x00o"
_ACTION = b"a"
_KEY = b"k"
_TIME = b"t"
_STATUSES = list(Status)
#: status, written at (ms), attempts, then the lengths of vendor_ref and error (-1: none)
_RESULT = struct.Struct(">BQIii")
_MS = struct.Struct(">Q")
_PARTITION = struct.Struct(">I")
_OFFSET_VALUE = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One committed result of an action of this executor's tools."""

    action_id: str
    vendor_key: str
    result: Result
    #: when its record was written (the record's timestamp; the executor's clock for its own)
    at_ms: int


def _pack(result: Result, at_ms: int) -> bytes:
    ref = result.vendor_ref.encode() if result.vendor_ref is not None else b""
    err = result.error.encode() if result.error is not None else b""
    return _RESULT.pack(_STATUSES.index(result.status), at_ms, result.attempts,
                        len(ref) if result.vendor_ref is not None else -1,
                        len(err) if result.error is not None else -1) + ref + err


def _unpack(raw: bytes) -> tuple[Result, int]:
    status, at_ms, attempts, ref_len, err_len = _RESULT.unpack_from(raw)
    at = _RESULT.size
    ref = raw[at:at + ref_len].decode() if ref_len >= 0 else None
    at += max(ref_len, 0)
    err = raw[at:at + err_len].decode() if err_len >= 0 else None
    return Result(_STATUSES[status], ref, err, attempts), at_ms


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    # Memory bounded at any size of the window: small memtables, and the index and Bloom
    # filter blocks partitioned and held in one block cache (only their top levels pinned),
    # not each table's whole filter on the heap. Most lookups are misses (a new action, a new
    # key): the filters answer them without reading data blocks. 10 M results written, on
    # their own: peak RSS 140 MB partitioned vs 205 MB with whole filters on the heap, 10.4
    # vs 9.0 us a result (docs/measured.md). A whole filter in a small cache instead is
    # evicted and read again at every lookup: twenty times slower.
    options.set_write_buffer_size(MEMTABLE_BYTES)
    options.set_max_write_buffer_number(2)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    table.set_index_type(BlockBasedIndexType.two_level_index_search())
    table.set_partition_filters(True)
    table.set_metadata_block_size(4096)
    table.set_block_cache(Cache(CACHE_BYTES))
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_top_level_index_and_filter(True)
    options.set_block_based_table_factory(table)
    return options


class ResultStore:
    def __init__(self, path: Path, *, key_window_ms: int) -> None:
        self.path = path
        #: a vendor key's first user older than this is no answer (the stream job's longest key TTL)
        self.key_window_ms = key_window_ms
        self.db = self._open()

    def _open(self) -> Rdict:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # the default column family's options given again: rocksdict reopens an existing
            # database with the ones stored in its folder otherwise (without the Bloom filter)
            return Rdict(str(self.path), _options(), column_families={"default": _options()})
        except Exception as exc:  # rocksdict raises plain Exception; a held LOCK is the usual one
            raise FatalError(f"cannot open the results index at {self.path} (is another executor with this "
                             f"slot running on this machine?): {exc}") from exc

    # -- what the executor asks ------------------------------------------------------
    def result(self, action_id: str) -> Result | None:
        raw = self.db.get(_ACTION + action_id.encode())
        return _unpack(raw)[0] if raw is not None else None

    def first_user(self, vendor_key: str, now_ms: int) -> str | None:
        raw = self.db.get(_KEY + vendor_key.encode())
        if raw is None:
            return None
        at_ms = _MS.unpack_from(raw)[0]
        return raw[_MS.size:].decode() if at_ms >= now_ms - self.key_window_ms else None

    def next_offsets(self) -> dict[int, int]:
        """Per results partition, the offset this store is complete up to (exclusive)."""
        found = {}
        for key, value in self.db.items(from_key=_OFFSET):
            assert isinstance(key, bytes) and isinstance(value, bytes)  # raw mode
            if not key.startswith(_OFFSET):
                break
            found[_PARTITION.unpack_from(key, len(_OFFSET))[0]] = _OFFSET_VALUE.unpack(value)[0]
        return found

    # -- writes: entries and offsets in one batch ------------------------------------
    def write(self, entries: Iterable[IndexEntry], next_offsets: Mapping[int, int]) -> int:
        """Write entries (each a later result than what the store holds for its action) and
        the offsets they reach, atomically. Returns entries written."""
        batch = WriteBatch(raw_mode=True)
        firsts: dict[bytes, bytes] = {}  # keys claimed earlier in this batch
        n = 0
        for e in entries:
            action = e.action_id.encode()
            batch.put(_ACTION + action, _pack(e.result, e.at_ms))
            key = _KEY + e.vendor_key.encode()
            claimed = firsts.get(key) or self.db.get(key)
            if claimed is None or _MS.unpack_from(claimed)[0] < e.at_ms - self.key_window_ms:
                firsts[key] = _MS.pack(e.at_ms) + action
                batch.put(key, firsts[key])
            batch.put(_TIME + _MS.pack(e.at_ms) + action, e.vendor_key.encode())
            n += 1
        for partition, offset in next_offsets.items():
            batch.put(_OFFSET + _PARTITION.pack(partition), _OFFSET_VALUE.pack(offset))
        self.db.write(batch)
        return n

    def drop_before(self, before_ms: int, limit: int = 20_000) -> int:
        """Remove up to ``limit`` entries written before ``before_ms`` (oldest first); returns
        how many time-index entries it went through (``limit``: call again)."""
        batch = WriteBatch(raw_mode=True)
        seen = 0
        for key, vendor_key in self.db.items(from_key=_TIME):
            assert isinstance(key, bytes) and isinstance(vendor_key, bytes)  # raw mode
            if not key.startswith(_TIME) or seen >= limit:
                break
            at_ms = _MS.unpack_from(key, len(_TIME))[0]
            if at_ms >= before_ms:
                break
            seen += 1
            batch.delete(key)
            action = key[len(_TIME) + _MS.size:]
            raw = self.db.get(_ACTION + action)
            if raw is not None and _unpack(raw)[1] == at_ms:  # not overwritten by a later result
                batch.delete(_ACTION + action)
            claimed = self.db.get(_KEY + vendor_key)
            if claimed is not None and claimed[_MS.size:] == action and _MS.unpack_from(claimed)[0] == at_ms:
                batch.delete(_KEY + vendor_key)
        if seen:
            self.db.write(batch)
        return seen

    def wipe(self) -> None:
        """Forget everything (the topic is not the one this store was filled from)."""
        self.db.close()
        Rdict.destroy(str(self.path))
        shutil.rmtree(self.path, ignore_errors=True)
        self.db = self._open()

    def close(self) -> None:
        self.db.close()
