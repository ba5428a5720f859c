"""Every side effect a sandbox performed, and every request it received: what tests and the
demo count. Effects alone cannot show a second call to a vendor that deduplicates (a charge
repeated with its key leaves one effect); the request log can."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Effect:
    vendor: str
    key: str
    what: str
    detail: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the sandbox received it, before any fault or dedup applied."""

    method: str
    path: str
    #: the Idempotency-Key header, or the Message-ID of a mail
    key: str = ""
    body: str = ""
    at: float = field(default_factory=time.time)
    #: the status of a refusal before the vendor acted on it (429 of a rate limit), else 0
    refused: int = 0
    #: its headers, lower-case names, credentials redacted (``authorization: Bearer <redacted>``)
    headers: dict[str, str] = field(default_factory=dict)
    #: its body as sent (a signature covers these bytes, not ``body``'s re-serialised JSON)
    raw: str = ""


class Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._effects: list[Effect] = []
        self._requests: list[Request] = []

    def received(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def requests(self, path_prefix: str = "", containing: str = "", refused: bool | None = None) -> list[Request]:
        """Requests under ``path_prefix`` whose key or body contains ``containing`` (only the
        refused ones, or only the others, when ``refused`` says which)."""
        with self._lock:
            return [r for r in self._requests if r.path.startswith(path_prefix)
                    and (containing in r.key or containing in r.body)
                    and (refused is None or bool(r.refused) == refused)]

    def record(self, effect: Effect) -> None:
        with self._lock:
            self._effects.append(effect)

    def effects(self, vendor: str | None = None, key: str | None = None) -> list[Effect]:
        with self._lock:
            return [e for e in self._effects if (vendor is None or e.vendor == vendor) and (key is None or e.key == key)]

    def count(self, vendor: str | None = None, key: str | None = None) -> int:
        return len(self.effects(vendor, key))

    def as_json(self) -> list[dict[str, Any]]:
        return [asdict(e) for e in self.effects()]

    def requests_json(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.requests()]
