"""Stream-job state for the transactional runtime: one RocksDB per (table, partition).

A store holds the changes of the open transaction apart (``pending``) until the transaction
commits; only then are they written to RocksDB, in one write batch together with the
changelog offset they reach (its next offset). So the local database never holds a change
whose transaction aborted, and a restart knows exactly which tail of the changelog it lacks.

Durability rule (one for every runtime): a state change reaches the changelog in the same
transaction as the input offset that caused it; the local RocksDB is a cache of the
changelog, trusted up to its next offset."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterable, Iterator

from rocksdict import Options, Rdict, WriteBatch

#: sorts before every state key (keys are text: dedup keys and scopes)
NEXT_OFFSET_KEY = b"\x00runonce.changelog.next_offset"


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    return options


class PartitionDB:
    """One partition of one table: RocksDB plus the open transaction's changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = Rdict(str(path), _options())
        #: key -> new value, or None for a delete; cleared at commit or abort
        self.pending: dict[bytes, bytes | None] = {}

    @property
    def next_offset(self) -> int | None:
        """The changelog offset this database is complete up to (exclusive), or None."""
        raw = self.db.get(NEXT_OFFSET_KEY)
        return int(raw) if raw is not None else None

    def get(self, key: bytes) -> bytes | None:
        if key in self.pending:
            return self.pending[key]
        value: bytes | None = self.db.get(key)
        return value

    def scan(self, after: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        items = self.db.items(from_key=after) if after is not None else self.db.items()
        for key, value in items:
            if key == NEXT_OFFSET_KEY or (after is not None and key == after):
                continue
            out.append((bytes(key), bytes(value)))  # type: ignore[arg-type]  # rocksdict keys/values: bytes here
            if len(out) >= limit:
                break
        return out

    def apply(self, changes: Iterable[tuple[bytes, bytes | None]], next_offset: int) -> None:
        """Write changes and the next offset atomically (restore, and committed transactions)."""
        batch = WriteBatch(raw_mode=True)
        for key, value in changes:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        batch.put(NEXT_OFFSET_KEY, str(next_offset).encode())
        self.db.write(batch)

    def close(self) -> None:
        self.db.close()


class TableState:
    """A table (``keys`` or ``scopes``) over the partitions this worker owns: a StateStore."""

    def __init__(self, name: str, changelog: str, root: Path) -> None:
        self.name = name
        self.changelog = changelog
        self.root = root / name
        self.parts: dict[int, PartitionDB] = {}

    def open(self, partition: int, *, wipe: bool = False) -> PartitionDB:
        path = self.root / str(partition)
        if wipe:
            self.close(partition)
            shutil.rmtree(path, ignore_errors=True)
        if partition not in self.parts:
            self.parts[partition] = PartitionDB(path)
        return self.parts[partition]

    def close(self, partition: int) -> None:
        part = self.parts.pop(partition, None)
        if part is not None:
            part.close()

    def close_all(self) -> None:
        for partition in list(self.parts):
            self.close(partition)

    # -- StateStore ------------------------------------------------------------------
    def get(self, partition: int, key: bytes) -> bytes | None:
        return self.parts[partition].get(key)

    def put(self, partition: int, key: bytes, value: bytes) -> None:
        self.parts[partition].pending[key] = value

    def delete(self, partition: int, key: bytes) -> None:
        self.parts[partition].pending[key] = None

    def scan(self, partition: int, after: bytes | None, limit: int) -> Iterable[tuple[bytes, bytes]]:
        """What ``get`` would answer, in key order: the database overlaid with the open
        transaction's changes (a hold put in this transaction is swept in it too)."""
        part = self.parts.get(partition)
        if part is None:
            return []
        committed = part.scan(after, limit)
        if not part.pending:
            return committed
        # Pending keys beyond the last committed key of a full page belong to a later page.
        bound = committed[-1][0] if len(committed) >= limit else None
        merged = dict(committed)
        for key, value in part.pending.items():
            if (after is not None and key <= after) or (bound is not None and key > bound):
                continue
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return sorted(merged.items())[:limit]

    # -- the transaction -------------------------------------------------------------
    def changes(self) -> Iterator[tuple[int, bytes, bytes | None]]:
        for partition, part in self.parts.items():
            for key, value in part.pending.items():
                yield partition, key, value

    def commit(self, next_offsets: dict[int, int]) -> None:
        """The transaction committed: its changes reached the changelog up to ``next_offsets``."""
        for partition, part in self.parts.items():
            if part.pending:
                part.apply(part.pending.items(), next_offsets[partition])
                part.pending = {}

    def abort(self) -> None:
        for part in self.parts.values():
            part.pending = {}
