"""Whether a process is alive and whether it is ready, as a Kubernetes probe asks
(``/healthz``, ``/readyz``; runonce/ops/observe/serve.py serves them beside ``/metrics``).

- **live**: its loop turned within ``live_bound_s``, or it is restoring state (inside the
  assignment callback, whose reads have their own bounds). A loop blocked past that (a call
  that never returns, a thread stuck on a lock) is restarted by the kubelet; a transactional
  call blocked past its own timeout already exits by the watchdog (watchdog.py).
- **ready**: it can do its work: its transactional producer initialised, its group joined,
  the state of every partition it was given restored (a stream worker still restoring
  RocksDB is not ready, though it decides its other partitions meanwhile), and no SIGTERM
  received. A replica given no partition (more
  replicas than partitions) is ready: it stands by, as a Kafka Streams instance in RUNNING.

Time arrives through ``clock``; the loop and the task tell it what happened."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

#: the default bound on a loop turn: a turn waits at most its fetch wait (≤ 1 s) plus one
#: transaction (bounded by the watchdog at CALL_TIMEOUT_S + its grace, 45 s)
LIVE_BOUND_S = 60.0


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    ok: bool
    #: why, in a line: what a probe's body and a person reading it see
    reason: str


class Health:
    """One process's health, written by its loop, read by its probe server's threads."""

    def __init__(self, name: str, live_bound_s: float = LIVE_BOUND_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.live_bound_s = live_bound_s
        self._clock = clock
        self._lock = threading.Lock()
        self._turned_at = clock()
        self._started = False
        self._joined = False
        self._restoring = False
        #: partitions whose state its loop restores between batches (each waits, paused)
        self._catching_up = 0
        self._stopping = False

    # -- what the process tells it --------------------------------------------------------
    def turned(self) -> None:
        """The loop turned (a batch, or an idle fetch)."""
        self._turned_at = self._clock()

    def started(self) -> None:
        """The transactional producer is initialised (or, for a process without one, it can publish)."""
        with self._lock:
            self._started = True

    def restoring(self) -> None:
        """Partitions were given and their state is being restored."""
        with self._lock:
            self._restoring = True

    def assigned(self) -> None:
        """The group gave this process its partitions (perhaps none) and their state is restored."""
        with self._lock:
            self._joined, self._restoring = True, False

    def catching_up(self, partitions: int) -> None:
        """How many partitions' state the loop still restores between batches: not ready until
        none (its loop turns meanwhile, deciding the others, so live as ever)."""
        with self._lock:
            self._catching_up = partitions

    def revoked(self) -> None:
        """A rebalance took its partitions: not ready until the next assignment is restored."""
        with self._lock:
            self._joined = False

    def stopping(self) -> None:
        """SIGTERM: not ready at once (no new traffic, no new partitions), live until it exits."""
        with self._lock:
            self._stopping = True

    # -- what a probe asks ---------------------------------------------------------------
    def live(self) -> ProbeAnswer:
        since = self._clock() - self._turned_at
        with self._lock:
            restoring = self._restoring
        if restoring:  # inside the assignment callback, which returns once every partition is restored
            return ProbeAnswer(True, f"{self.name}: restoring the state of its partitions")
        if since > self.live_bound_s:
            return ProbeAnswer(False, f"{self.name}: its loop has not turned for {since:.0f} s "
                                      f"(bound {self.live_bound_s:.0f} s)")
        return ProbeAnswer(True, f"{self.name}: its loop turned {since:.1f} s ago")

    def ready(self) -> ProbeAnswer:
        with self._lock:
            started, joined, restoring, stopping = self._started, self._joined, self._restoring, self._stopping
            catching_up = self._catching_up
        if stopping:
            return ProbeAnswer(False, f"{self.name}: stopping (SIGTERM): finishing its transaction")
        if not started:
            return ProbeAnswer(False, f"{self.name}: initialising its transactional producer")
        if restoring:
            return ProbeAnswer(False, f"{self.name}: restoring the state of its partitions")
        if not joined:
            return ProbeAnswer(False, f"{self.name}: waiting for its group to give it partitions")
        if catching_up:
            return ProbeAnswer(False, f"{self.name}: restoring the state of {catching_up} partition"
                                      f"{'s' if catching_up > 1 else ''} (the others are decided meanwhile)")
        return ProbeAnswer(True, f"{self.name}: ready")
