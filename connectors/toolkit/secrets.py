"""A secret named in the connectors file, resolved once and never shown.

``{ env = "VAR" }`` or ``{ file = "path" }``: the value is read when the connectors file is
loaded, so a missing variable or unreadable file stops the executor at start with the
vendor and field named. ``repr``, ``str`` and f-strings show only where the secret came
from; the value leaves this object only through ``reveal()``, called at the one place a
vendor's request is built."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Secret:
    #: where the value came from: ``env:STRIPE_API_KEY`` or ``file:/run/secrets/smtp``
    source: str
    _value: str = field(repr=False, compare=False)

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return f"<secret from {self.source}>"

    def __format__(self, spec: str) -> str:
        return str(self)
