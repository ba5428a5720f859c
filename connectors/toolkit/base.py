"""What a connector is: one vendor, the tools it serves, and what it can do on redelivery."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping, Protocol


class Capability(enum.Enum):
    #: the vendor deduplicates on a key we send: calling again with it is safe
    VENDOR_KEY = "vendor_key"
    #: the vendor refuses a second copy of one id that we choose, derived from the action's
    #: natural id (its vendor key when it has none): calling again is safe, and two actions with
    #: one natural id make one effect, the second answered with the first's (a calendar event)
    NATURAL_KEY = "natural_key"
    #: we can ask the vendor whether the effect already happened
    STATE_CHECK = "state_check"
    #: the effect and a marker of it commit in one transaction of the vendor's (your database):
    #: performing again finds the marker first, so an outcome is never in doubt while it answers
    ATOMIC = "atomic"
    #: neither: after an unknown outcome the action is marked in_doubt, never re-run
    NONE = "none"


@dataclass(frozen=True, slots=True)
class ActionCall:
    """What a connector needs of an approved action."""

    action_id: str
    tool: str
    params: Mapping[str, Any]
    #: stable across redeliveries: the caller's idempotency key, else the action id
    vendor_key: str
    #: the write-once natural id the stream job gave the action (its tenant's own), for tools
    #: with one; a NATURAL_KEY vendor's id is derived from it, else from ``vendor_key``
    natural_id: str | None = None


@dataclass(frozen=True, slots=True)
class VendorResponse:
    vendor_ref: str
    detail: str = ""


class Connector(Protocol):
    name: str
    tools: frozenset[str]
    capability: Capability

    def perform(self, call: ActionCall) -> VendorResponse:
        """Do the side effect once. Raises a ConnectorError subclass."""
        ...

    #: STATE_CHECK connectors may also say ``check_lag_s``: how long after an effect ``check``
    #: may still miss it (a search index's lag). The runner believes "absent" only after it.

    def check(self, call: ActionCall) -> VendorResponse | None:
        """STATE_CHECK connectors: the effect if it already happened, else None. Raises a
        ConnectorError when it cannot tell: that is never taken for "absent"."""
        ...


class NoStateCheck:
    """For connectors whose vendor cannot be asked whether an effect happened (a vendor key or
    nothing): ``check`` never answers and no lag is assumed."""

    check_lag_s = 0.0

    def check(self, call: ActionCall) -> VendorResponse | None:
        return None
