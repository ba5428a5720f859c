"""Leave when a Kafka call blocks past its own timeout.

librdkafka can block in a transactional call past its timeout when the group or transaction
coordinator goes away (confluentinc/librdkafka#5456). A stuck process holds its partitions
and does nothing, so it leaves instead: the open transaction is aborted by the broker, and
the restarted process resumes from the committed offsets.

One thread per process watches a deadline that each guarded call sets and clears."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Callable, Iterator

log = logging.getLogger("runonce.kafka")

#: exit status when a guarded call outlives its limit (the supervisor restarts the process)
EXIT_STUCK = 75


class Watchdog:
    """Exits the process when a guarded call outlives ``limit_s``."""

    def __init__(self, who: str, limit_s: float,
                 clock: Callable[[], float] = time.monotonic, start: bool = True) -> None:
        self.who = who
        self.limit_s = limit_s
        self.clock = clock
        self._call = ""
        self._limit_s = limit_s
        self._deadline: float | None = None
        if start:
            threading.Thread(target=self._watch, name="txn-watchdog", daemon=True).start()

    @contextlib.contextmanager
    def guard(self, call: str, limit_s: float | None = None) -> Iterator[None]:
        """``limit_s``: this call's own limit (default: the watchdog's)."""
        self._limit_s = limit_s if limit_s is not None else self.limit_s
        self._call, self._deadline = call, self.clock() + self._limit_s
        try:
            yield
        finally:
            self._deadline = None

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            self.check()

    def check(self) -> None:
        """Leave if the guarded call has outlived its limit (the watch thread calls this each second)."""
        deadline = self._deadline
        if deadline is not None and self.clock() > deadline:
            leave_for_restart(f"{self.who}: {self._call} still blocked after {self._limit_s:.0f} s")


def leave_for_restart(why: str) -> None:
    """Log why and exit at once with EXIT_STUCK. No cleanup runs: a stuck client's close would
    block too, and the broker aborts what the process left open."""
    log.critical("%s; exiting for a restart", why)
    logging.shutdown()
    os._exit(EXIT_STUCK)
