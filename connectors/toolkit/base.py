"""What a connector is: one vendor, the tools it serves, and what it can do on redelivery."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from runonce.errors import ConfigError


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
    """Everything the executor may use of every connector. What only some can do is a Protocol
    of its own below, found with ``isinstance``."""

    name: str
    tools: frozenset[str]
    capability: Capability

    def perform(self, call: ActionCall) -> VendorResponse:
        """Do the side effect once. Raises a ConnectorError subclass."""
        ...


@runtime_checkable
class StateCheck(Protocol):
    """Required of a ``STATE_CHECK`` connector: the vendor asked whether an effect happened."""

    #: how long after an effect ``check`` may still miss it (a search index's lag): the runner
    #: believes "absent" only from an answer given that long after the last attempt
    check_lag_s: float

    @property
    def timeout_s(self) -> float:
        """How long one request may take: a call started by another process lands within it."""
        ...

    def check(self, call: ActionCall) -> VendorResponse | None:
        """The effect if it already happened, else None. Raises a ConnectorError when it cannot
        tell: that is never taken for "absent"."""
        ...


@runtime_checkable
class Probe(Protocol):
    """``runonce connectors check --probe``: one harmless request with the configured credentials."""

    def probe(self) -> str:
        """What the vendor answered, in a few words. Raises a ConnectorError."""
        ...


@runtime_checkable
class Pruner(Protocol):
    """A connector that keeps markers of its own (your database's): an idle executor has it drop
    those older than the key window, as the stream job forgets those keys."""

    def prune(self, older_than_ms: int) -> int:
        """Remove markers older than ``older_than_ms``; how many went. Raises a ConnectorError."""
        ...


@runtime_checkable
class CommitHook(Protocol):
    """A connector that commits in the vendor's own transaction (``ATOMIC``): crash tests kill
    the process just before that COMMIT (the ``before_vendor_commit`` failpoint)."""

    def hooked(self, before_commit: Callable[[ActionCall], None]) -> Connector:
        """A copy that calls ``before_commit`` after the effect and its marker, before COMMIT."""
        ...


def state_check(connector: Connector) -> StateCheck | None:
    """The state check the runner asks: the connector itself when its capability is
    ``STATE_CHECK`` (which it must then implement), else None."""
    if connector.capability is not Capability.STATE_CHECK:
        return None
    if not isinstance(connector, StateCheck):
        raise ConfigError(f"{connector.name}: its capability is STATE_CHECK, but it has no check(call), "
                          f"check_lag_s and timeout_s (runonce.connectors.toolkit.base.StateCheck)")
    return connector
