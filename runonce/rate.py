"""Our pace toward one vendor: one type and one parser for both ways to give it, with one set
of names. The connectors file's ``rate = { per_s = 50, burst = 5, in_flight = 8 }`` on a
vendor's table; and ``RUNONCE_VENDOR_LIMITS`` (``payments:per_s=50,in_flight=32;
email:per_s=10,burst=5``), an operator's override at start that replaces a vendor's ``rate``
whole (a pod's environment, without a new connectors file)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from runonce.errors import ConfigError

FIELDS = ("per_s", "burst", "in_flight")
ENV = "RUNONCE_VENDOR_LIMITS"

#: ``(field, message) -> ConfigError``: the error names where the rate was written
Said = Callable[[str, str], ConfigError]


@dataclass(frozen=True, slots=True)
class Rate:
    """Calls per second (a token bucket holding ``burst``; None: none of ours, only the
    vendor's 429 and Retry-After), and calls in flight at once (None: the executor's
    ``executor_max_in_flight``)."""

    per_s: float | None = None
    burst: int = 1
    in_flight: int | None = None

    @classmethod
    def of(cls, table: Mapping[str, object], said: Said) -> Rate:
        extra = sorted(set(table) - set(FIELDS))
        if extra:
            hint = " (per_s is the rate's name)" if extra[0] == "rate" else ""
            raise said(extra[0], f"unknown field; the fields are {', '.join(sorted(FIELDS))}{hint}")
        per_s, burst, in_flight = table.get("per_s"), whole(table.get("burst", 1)), whole(table.get("in_flight"))
        if per_s is not None and (isinstance(per_s, bool) or not isinstance(per_s, (int, float)) or per_s <= 0):
            raise said("per_s", f"must be a positive number, got {per_s!r}")
        for label, n in (("burst", burst), ("in_flight", in_flight)):
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n <= 0):
                raise said(label, f"must be a positive integer, got {n!r}")
        assert isinstance(burst, int)
        return cls(None if per_s is None else float(per_s), burst, in_flight if isinstance(in_flight, int) else None)


def overrides(text: str) -> tuple[tuple[str, Rate], ...]:
    """``RUNONCE_VENDOR_LIMITS``: each vendor's rate; a ConfigError names the vendor and the field."""
    found: dict[str, Rate] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        vendor, sep, items = (x.strip() for x in part.partition(":"))
        if not sep or not vendor or not items:
            raise ConfigError(f"{ENV}: {part!r} must be VENDOR:FIELD=VALUE[,FIELD=VALUE] "
                              f"(fields {', '.join(FIELDS)})")
        if vendor in found:
            raise ConfigError(f"{ENV}: {vendor} is named twice")

        def said(field: str, message: str, vendor: str = vendor) -> ConfigError:
            return ConfigError(f"{ENV}: {vendor}.{field}: {message}")

        table: dict[str, object] = {}
        for item in items.split(","):
            name, eq, value = (x.strip() for x in item.partition("="))
            if not eq:
                raise said(name or "?", "must be FIELD=VALUE")
            table[name] = _number(value)
        found[vendor] = Rate.of(table, said)
    return tuple(found.items())


def _number(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text  # said by Rate.of as what it is not


def whole(value: object) -> object:
    """A float with no fraction as the integer it is: Helm's ``toToml`` writes every number of a
    chart's values as a float (``port = 587.0``); 587.5 stays a float, and is refused. Every
    integer of the connectors file is read through it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
