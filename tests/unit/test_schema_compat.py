"""Every schema stays backward compatible with each previous version kept in schemas/history/:
a reader on the current schema can read what the old writers wrote."""

from __future__ import annotations

import json

import avro.schema
import pytest
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from runonce import schemas


def _parse(filename: str, folder: str = "") -> avro.schema.Schema:
    names = avro.schema.Names()
    # ActionDecision names ActionRequested: parse the request first into the same namespace.
    if not filename.startswith("action_requested"):
        req = "action_requested.avsc" if not folder else _history_of("action_requested", filename)
        avro.schema.make_avsc_object(schemas.load_raw(req, folder), names)
    return avro.schema.make_avsc_object(schemas.load_raw(filename, folder), names)


def _history_of(stem: str, sibling: str) -> str:
    version = sibling.rsplit(".", 2)[-2]
    return f"{stem}.{version}.avsc"


HISTORY = schemas.history_files()


def test_history_is_not_empty() -> None:
    assert {h.split(".")[0] for h in HISTORY} == {f.removesuffix(".avsc") for f in schemas.SCHEMA_FILES}


@pytest.mark.parametrize("old", HISTORY)
def test_current_reads_previous(old: str) -> None:
    current = _parse(old.split(".")[0] + ".avsc")
    previous = _parse(old, "history")
    result = ReaderWriterCompatibilityChecker().get_compatibility(current, previous)
    assert result.compatibility is SchemaCompatibilityType.compatible, result.messages


def test_checker_catches_an_incompatible_change() -> None:
    # The check itself must be able to fail: a new required field without a default is not compatible.
    raw = schemas.load_raw("action_result.avsc")
    raw["fields"].append({"name": "new_required", "type": "string"})
    broken = avro.schema.parse(json.dumps(raw))
    previous = _parse("action_result.v1.avsc", "history")
    result = ReaderWriterCompatibilityChecker().get_compatibility(broken, previous)
    assert result.compatibility is SchemaCompatibilityType.incompatible
