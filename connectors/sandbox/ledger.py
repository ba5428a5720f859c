"""Every side effect a sandbox performed: what tests and the demo count."""

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


class Ledger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._effects: list[Effect] = []

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
