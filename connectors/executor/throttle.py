"""One vendor's pace, shared by every call an executor makes to it.

Two rules, both for the whole vendor rather than the one call:

* **our rate**: a token bucket (``rate_per_s``, holding at most ``burst``) paces the calls, so
  a vendor that allows 50 calls/s is sent 50/s and not a burst it refuses;
* **the vendor's word**: a refusal for its limit (429, ``RateLimited``) pauses *every* call for
  the Retry-After it gave, and empties the bucket, so the calls resume at our rate once the
  vendor's own window has refilled. Pausing only the refused call would let the others spend
  that window, and the refused call would meet a refusal again when it retried. For the same
  reason the refused calls go first when the pause ends: a call never refused waits until every
  refused call has been answered again (``turn``). Without that, and without a rate of ours,
  the threads never refused would spend the refilled window before a refused one's request
  arrived (a woken thread is not a sent request).

A call waiting here has not been sent: waiting is always safe.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

#: the pause after a refusal that did not say how long (no or unreadable Retry-After)
DEFAULT_PAUSE_S = 1.0
#: how often a call not yet sent looks again while refused calls go before it
_TURN_S = 0.002
_EPSILON = 1e-9


class Throttle:
    def __init__(self, vendor: str, rate_per_s: float | None = None, burst: int = 1, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 on_refusal: Callable[[], None] | None = None) -> None:
        self.vendor = vendor
        self.rate_per_s = rate_per_s
        self.burst = max(1, burst)
        self.clock = clock
        self.sleep = sleep
        self.on_refusal = on_refusal
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._stamp = clock()
        self._paused_until = 0.0
        self._refused_turns = 0
        #: calls waiting for the pace or a pause right now (the executor's metric reads it)
        self.waiting = 0
        #: refusals the vendor gave for its limit, and seconds calls spent waiting here, in all
        self.refusals = 0
        self.waited_s = 0.0

    @contextlib.contextmanager
    def turn(self, *, refused_before: bool = False) -> Iterator[None]:
        """One call's turn, from its wait here to its answer. ``refused_before``: this call was
        refused for the vendor's limit; it goes before every call that was not, and they wait
        until it has its answer."""
        with self._lock:
            self._refused_turns += refused_before
        try:
            self._acquire(refused_before)
            yield
        finally:
            with self._lock:
                self._refused_turns -= refused_before

    def acquire(self) -> None:
        """Return when one call may be sent: past any pause, with a token of the rate."""
        self._acquire(False)

    def _acquire(self, refused_before: bool) -> None:
        entered: float | None = None
        try:
            while True:
                with self._lock:
                    now = self.clock()
                    wait_s = self._wait_s(now)
                    if wait_s <= 0 and not refused_before and self._refused_turns:
                        wait_s = _TURN_S  # the refused calls first
                    elif wait_s <= 0:
                        if self.rate_per_s is not None:
                            self._tokens -= 1
                        if entered is not None:
                            self.waited_s += now - entered
                        return
                    if entered is None:
                        entered = now
                        self.waiting += 1
                self.sleep(wait_s)
        finally:
            if entered is not None:
                with self._lock:
                    self.waiting -= 1

    def refused(self, retry_after_s: float | None) -> None:
        """The vendor refused a call for its limit: every call waits ``retry_after_s``, then
        resumes at our rate from an empty bucket."""
        pause_s = DEFAULT_PAUSE_S if retry_after_s is None else retry_after_s
        with self._lock:
            now = self.clock()
            self.refusals += 1
            self._paused_until = max(self._paused_until, now + pause_s)
            self._tokens = min(self._tokens, 0.0)
            self._stamp = max(self._stamp, self._paused_until)  # nothing accrues during the pause
        if self.on_refusal is not None:
            self.on_refusal()

    def _wait_s(self, now: float) -> float:
        if now < self._paused_until:
            return self._paused_until - now
        if self.rate_per_s is None:
            return 0.0
        if now > self._stamp:
            self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate_per_s)
            self._stamp = now
        if self._tokens >= 1.0 - _EPSILON:  # float refills land a hair under 1: never sleep ~0 s
            return 0.0
        return (1.0 - self._tokens) / self.rate_per_s
