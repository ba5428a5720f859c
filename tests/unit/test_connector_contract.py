"""The connector contract (connectors/toolkit/base.py): what every connector has, what only some
do (each a Protocol found with ``isinstance``, never ``getattr``), and the crash tests'
failpoints as an observer around a connector (connectors/executor/failpoints.py).

Catches: a STATE_CHECK kind without a check loading, to fail only at the first redelivery
that needs it; the executor writing a hook onto a connector it does not own, or hooking one
that has no vendor transaction; a failpoint killing at the wrong pass, or aborting a record's
result more than once (its redelivery would never commit); the failpoints' names drifting
from the setting that validates them."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Callable

import pytest

from runonce.connectors.executor import registry
from runonce.connectors.executor.failpoints import Failpoints
from runonce.connectors.toolkit.base import ActionCall, Capability, CommitHook, Connector, StateCheck, VendorResponse
from runonce.connectors.toolkit.config import VendorFields
from runonce.errors import ConfigError
from runonce.executor_failpoint import Point

ROOT = Path(__file__).parents[2]
CALL = ActionCall("a1", "t", {}, "k1")


@dataclasses.dataclass(frozen=True)
class Plain:
    name: str = "plain"
    tools: frozenset[str] = frozenset({"t"})
    capability: Capability = Capability.VENDOR_KEY

    def perform(self, call: ActionCall) -> VendorResponse:
        return VendorResponse("r")


@dataclasses.dataclass(frozen=True)
class Transactional(Plain):
    capability: Capability = Capability.ATOMIC
    before_commit: Callable[[ActionCall], None] | None = None

    def perform(self, call: ActionCall) -> VendorResponse:
        if self.before_commit is not None:
            self.before_commit(call)
        return VendorResponse("r")

    def hooked(self, before_commit: Callable[[ActionCall], None]) -> Connector:
        return dataclasses.replace(self, before_commit=before_commit)


def test_a_failpoint_kills_at_its_nth_pass_of_its_own_point_only() -> None:
    kills: list[int] = []
    points = Failpoints(Point.AFTER_CALL, nth=2, kill=lambda: kills.append(1))
    points.passing(Point.BEFORE_CALL)
    points.passing(Point.AFTER_CALL)
    assert kills == []
    points.passing(Point.AFTER_CALL)
    points.passing(Point.AFTER_CALL)
    assert kills == [1]
    assert Failpoints.parse("after_call:2").nth == 2 and Failpoints.parse(None).point is None


def test_abort_result_aborts_each_records_first_result_only() -> None:
    points = Failpoints.parse("abort_result")
    assert [points.aborts(b"a"), points.aborts(b"a"), points.aborts(b"b")] == [True, False, True]
    assert not Failpoints.parse("after_call").aborts(b"a")


def test_before_vendor_commit_wraps_a_connector_with_a_vendor_transaction_and_no_other() -> None:
    kills: list[int] = []
    points = Failpoints(Point.BEFORE_VENDOR_COMMIT, kill=lambda: kills.append(1))
    plain, own = Plain(), Transactional()
    assert points.around(plain) is plain and not isinstance(plain, CommitHook)
    hooked = points.around(own)
    assert hooked is not own and own.before_commit is None, "the connector itself was changed"
    own.perform(CALL)
    assert kills == []
    hooked.perform(CALL)
    assert kills == [1]
    assert Failpoints.parse("after_call").around(own) is own


def test_a_state_check_kind_without_a_check_is_refused_when_the_file_loads() -> None:
    @dataclasses.dataclass(frozen=True)
    class Claims(Plain):
        capability: Capability = Capability.STATE_CHECK

    fields = VendorFields("connectors.toml", "tickets", {"kind": "tickets"}, {})
    with pytest.raises(ConfigError, match="vendors.tickets.*STATE_CHECK, but it has no check"):
        registry.build_vendor(fields, {"tickets": lambda f: Claims(name=f.name)})

    @dataclasses.dataclass(frozen=True)
    class Checks(Claims):
        check_lag_s: float = 0.0
        timeout_s: float = 1.0

        def check(self, call: ActionCall) -> VendorResponse | None:
            return None

    built = registry.build_vendor(fields, {"tickets": lambda f: Checks(name=f.name)})
    assert isinstance(built.connector, StateCheck)


def test_a_plugin_factory_without_a_field_spec_is_held_to_the_fields_it_read() -> None:
    """A kind installed as a plain callable (no ``Kind`` and no spec) reads ``region``; the file
    also gives ``api_kye``, which nothing reads: the load fails naming it, as for a shipped
    kind. Catches the check of unread fields left out for factories without a spec (a
    misspelt secret would load, and the connector would run without it)."""
    fields = VendorFields("connectors.toml", "tickets", {"kind": "tickets", "region": "eu", "api_kye": "x"}, {})

    def factory(f: VendorFields) -> Plain:
        f.text("region")
        return Plain(name=f.name)

    with pytest.raises(ConfigError, match="vendors.tickets.*api_kye.*unknown field for kind 'tickets'"):
        registry.build_vendor(fields, {"tickets": factory})
    read_all = VendorFields("connectors.toml", "tickets", {"kind": "tickets", "region": "eu"}, {})
    assert registry.build_vendor(read_all, {"tickets": factory}).connector.name == "tickets"


def test_the_executor_asks_a_connector_what_it_can_do_with_isinstance_never_getattr() -> None:
    """The issue's acceptance, held: the optional parts are Protocols."""
    found = [f"{path.relative_to(ROOT)}: {line.strip()}" for path in (ROOT / "connectors" / "executor").glob("*.py")
             for line in path.read_text().splitlines()
             if re.search(r"(getattr|hasattr|setattr)\(.*connector", line)]
    assert not found, found
