"""Fault injection for the sandbox vendors: per path prefix, delays, dropped responses, 500s before the
effect, 5xx after it, a search index that lags behind writes, and a rate limit."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field


@dataclass
class VendorFault:
    prefix: str
    #: only requests of this method (``PATCH``); empty: every method
    method: str = ""
    delay_s: float = 0.0
    #: perform the effect, then close the connection without answering (this many times)
    drop_response: int = 0
    #: answer 500 without performing anything (this many times)
    fail_500: int = 0
    #: perform the effect, then answer ``after_effect_status`` (this many times): a gateway in
    #: front of the vendor that timed out or failed after the vendor acted
    fail_after_effect: int = 0
    after_effect_status: int = 502
    #: a search under this prefix does not see what was created in the last this many seconds
    #: (a real Jira's search index is eventually consistent)
    index_lag_s: float = 0.0
    #: a vendor's rate limit: calls under this prefix beyond this many a second (a token bucket
    #: holding one second's worth, as Stripe's) are answered 429 with Retry-After, unperformed
    rate_limit_per_s: float = 0.0
    _tokens: float = field(default=-1.0, repr=False)
    _stamp: float = field(default=0.0, repr=False)

    def refused_for_s(self, now: float) -> int | None:
        """The rate limit's answer to one call at ``now``: None lets it through (and spends a
        token), else the whole seconds until one call is allowed (HTTP's delay-seconds)."""
        if self._tokens < 0:  # first call: a full bucket
            self._tokens, self._stamp = self.rate_limit_per_s, now
        self._tokens = min(self.rate_limit_per_s, self._tokens + (now - self._stamp) * self.rate_limit_per_s)
        self._stamp = now
        if self._tokens < 1.0:
            return max(1, math.ceil((1.0 - self._tokens) / self.rate_limit_per_s))
        self._tokens -= 1.0
        return None


def _on(f: VendorFault, path: str, method: str) -> bool:
    return path.startswith(f.prefix) and (not f.method or not method or f.method == method)


class VendorFaults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[VendorFault] = []

    def add(self, fault: VendorFault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def delay_for(self, path: str, method: str = "") -> float:
        with self._lock:
            return max((f.delay_s for f in self._faults if _on(f, path, method)), default=0.0)

    def index_lag_for(self, path: str, method: str = "") -> float:
        with self._lock:
            return max((f.index_lag_s for f in self._faults if _on(f, path, method)), default=0.0)

    def after_effect_status(self, path: str, method: str = "") -> int | None:
        """The status to answer after performing, if a 'fail_after_effect' is left for this path."""
        with self._lock:
            for f in self._faults:
                if _on(f, path, method) and f.fail_after_effect > 0:
                    f.fail_after_effect -= 1
                    return f.after_effect_status
        return None

    def rate_limited(self, path: str, method: str = "") -> int | None:
        """Seconds to answer in Retry-After when a rate limit refuses this call; None lets it through."""
        now = time.monotonic()
        with self._lock:
            for f in self._faults:
                if not _on(f, path, method) or f.rate_limit_per_s <= 0:
                    continue
                refused = f.refused_for_s(now)
                if refused is not None:
                    return refused
        return None

    def take(self, path: str, kind: str, method: str = "") -> bool:
        """Consume one 'drop_response', 'fail_500' or 'fail_after_effect' for this path, if any is left."""
        with self._lock:
            for f in self._faults:
                if _on(f, path, method) and getattr(f, kind) > 0:
                    setattr(f, kind, getattr(f, kind) - 1)
                    return True
        return False
