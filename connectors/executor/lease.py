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

Assignment proves ownership too; a revocation ends it."""

from __future__ import annotations

import math
import time
from typing import Callable

#: the share of the consumer's session timeout a lease lasts
SESSION_SHARE = 0.5


class Lease:
    def __init__(self, length_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.length_s = length_s
        self.clock = clock
        self._until = -math.inf

    @classmethod
    def of_session(cls, session_timeout_ms: int, clock: Callable[[], float] = time.monotonic) -> Lease:
        return cls(session_timeout_ms / 1000 * SESSION_SHARE, clock)

    def proven(self, at: float) -> None:
        """Ownership was proven by something begun at ``at`` (by ``clock``) and confirmed since."""
        self._until = max(self._until, at + self.length_s)

    def ended(self) -> None:
        self._until = -math.inf

    def holds(self) -> bool:
        return self.clock() < self._until

