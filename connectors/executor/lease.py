"""How long an executor may go on calling vendors after it last proved it owns its partitions.

Kafka's fencing refuses a zombie's *commit*: an executor cut off from the broker (or paused
past its session) whose partitions moved cannot write a result. It does not stop the zombie's
*calls*. Its intents are committed, the vendor is reachable, and the next owner, finding
those intents without results, reconciles them meanwhile: a vendor that can only be asked
(``STATE_CHECK``) says "absent", the next owner performs, and the zombie performs again.

So a vendor call starts only within ``length_s`` of a commit that proved ownership: a
transaction carrying the group's metadata (KIP-447) commits only while its member is in the
group's current generation, and the broker keeps a member at least a session timeout past
its last heartbeat. Half the session timeout leaves the other half (less a heartbeat
interval) before any other member can be given the partition. The next owner, for its part,
believes a state check's "absent" only from an answer given a lease, a request's timeout and
the vendor's lag after it started (runner.py): by then any call a zombie could still start
has landed.

Assignment proves ownership too; a revocation ends it. While a batch's calls run, the
executor renews the lease with a commit of the batch's first offsets (again with the group's
metadata) every half lease: a healthy executor's lease never runs out however slow its vendor,
and only one that cannot prove it owns its partitions (cut off, fenced, frozen) stops calling.
A stop (SIGTERM) ends it for good: calls in flight finish, the rest never start.

A call the lease did not cover never started: the executor says so durably, in its next
transaction (a withdrawn intent, runonce/wire/results.py), and the next owner performs it.

The clock counts a suspended machine (``CLOCK_BOOTTIME``, Linux): a monotonic clock that stops
while a VM is frozen would let a lease outlive the freeze.

The limit: a process paused *after* its lease check and before its request leaves, for longer
than the next owner's zombie window, still sends late. Only a vendor that refuses the copy
closes that (a vendor key, an atomic marker); a state check's window and SMTP do not
(docs/operating.md, "A partition, not a crash")."""

from __future__ import annotations

import math
import time
from typing import Callable

#: the share of the consumer's session timeout a lease lasts
SESSION_SHARE = 0.5


def boot_clock() -> float:
    """Seconds on a clock that goes on while the machine is suspended, where there is one."""
    return time.clock_gettime(_BOOT_CLOCK)


_BOOT_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


class Lease:
    def __init__(self, length_s: float, clock: Callable[[], float] = boot_clock) -> None:
        self.length_s = length_s
        self.clock = clock
        self._until = -math.inf
        self._stopped = False
        #: why it last ended, for the log line of the calls it did not cover
        self.why_ended = "never proven"
        #: why the last proving commit failed, if it did
        self.last_failure: str | None = None

    @classmethod
    def of_session(cls, session_timeout_ms: int, clock: Callable[[], float] = boot_clock) -> Lease:
        return cls(session_timeout_ms / 1000 * SESSION_SHARE, clock)

    def proven(self, at: float) -> None:
        """Ownership was proven by something begun at ``at`` (by ``clock``) and confirmed since."""
        if not self._stopped:
            self._until = max(self._until, at + self.length_s)
            self.last_failure = None

    def unproven(self, why: str) -> None:
        """A proving commit failed: the lease runs out unless a later one succeeds."""
        self.last_failure = why

    def ended(self, why: str = "the partitions were revoked") -> None:
        self._until = -math.inf
        self.why_ended = why

    def stop(self) -> None:
        """No call starts from now on, whatever a commit proves (the process is stopping)."""
        self._stopped = True
        self.ended("the executor is stopping")

    def holds(self) -> bool:
        return self.clock() < self._until

    def due(self) -> bool:
        """Half of it is spent: time for a proving commit, if a batch still has calls to start."""
        return not self._stopped and self._until - self.clock() < self.length_s / 2

    def lapsed_why(self) -> str:
        """Why it does not hold now: what ended it, or no commit proved ownership in time."""
        if self._until == -math.inf:
            return self.why_ended
        why = (f"the last proving commit failed: {self.last_failure}" if self.last_failure is not None
               else "cut off from the broker, or the process was frozen")
        return f"no commit proved ownership for {self.clock() - self._until + self.length_s:.1f} s ({why})"

    def proving(self, commit: Callable[[], bool]) -> bool:
        """``commit`` (true: it committed with the group's metadata) proves ownership from the
        moment it began: the clock is read before it, however long it takes."""
        began = self.clock()
        if not commit():
            return False
        self.proven(began)
        return True

    def zombie_window_s(self, request_timeout_s: float) -> float:
        """How long after a reconcile starts a process that lost these partitions may still have
        a call land: its lease (as long as this one), then the request's timeout."""
        return self.length_s + request_timeout_s


class NoLease(Lease):
    """The null object: every call may start, nothing renews it, nothing ends it (the runner's
    protocol on its own, and tests of what the lease does not touch)."""

    def __init__(self) -> None:
        super().__init__(0.0, clock=lambda: 0.0)
        self.why_ended = "no lease"

    def proven(self, at: float) -> None:
        return None

    def ended(self, why: str = "") -> None:
        return None

    def stop(self) -> None:
        return None

    def holds(self) -> bool:
        return True

    def due(self) -> bool:
        return False

    def lapsed_why(self) -> str:
        return self.why_ended

    def zombie_window_s(self, request_timeout_s: float) -> float:
        return 0.0


#: the one ``NoLease`` (it keeps no state)
NO_LEASE = NoLease()

