"""A worker's local RocksDB is trusted only after a clean stop.

faust (at-least-once) writes a table change to the local RocksDB at once and sends its
changelog record later, from a buffer; the offset it stores beside the data is the last
changelog record the broker *acknowledged*. A SIGKILL between the two leaves local state
ahead of its changelog: a claim the broker never saw. The restarted worker reads its local
offset, recovers only what came after it, and so keeps the claim; when it decides the killed
record again it finds its own claim, re-emits the same decision, and writes nothing (the state
did not change). The claim now exists on one disk only: the next worker to own the partition
restores from the changelog without it and approves the action's repeat. The crash test saw
this (a keyed retry decided APPROVED by one worker and DROPPED by another; a natural-id family
approved twice) one run in three, after SIGKILLs that left the local state in place.

So, as Kafka Streams does under exactly-once, the local state survives only a clean stop:
``open_local_state`` (before faust opens its stores) drops the tables when the last run did
not end with ``close_local_state``, and recovery restores them from the changelogs, which
hold exactly what was acknowledged.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

log = logging.getLogger("runonce.streams")

#: written when a worker stopped cleanly (everything flushed and committed); removed at start
CLEAN_STOP_MARK = "stopped-cleanly"


def open_local_state(datadir: Path) -> bool:
    """Keep the local tables if the last run stopped cleanly, else drop them; returns whether
    they were kept. Either way the mark is gone until this run stops cleanly."""
    mark = datadir / CLEAN_STOP_MARK
    if mark.exists():
        mark.unlink()
        return True
    tables = [child for child in datadir.iterdir() if child.is_dir()] if datadir.exists() else []
    for child in tables:
        shutil.rmtree(child)
    if tables:
        log.warning("local state in %s was not closed cleanly (the last run was killed or crashed): "
                    "dropped it; restoring every table from its changelog", datadir)
    return False


def close_local_state(datadir: Path) -> None:
    """The worker stopped cleanly: its local tables match their changelogs."""
    datadir.mkdir(parents=True, exist_ok=True)
    (datadir / CLEAN_STOP_MARK).touch()
