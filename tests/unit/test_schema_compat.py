"""Every schema stays backward compatible with each previous version kept in schemas/history/:
a reader on the current schema can read what the old writers wrote."""

from __future__ import annotations

import json

import avro.schema
import pytest
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from runonce import schemas


def _parse(filename: str, folder: str = "") -> avro.schema.Schema:
    """One schema, after the ones before it in SCHEMA_FILES (of the same version), whose
    named types it may use (ActionDecision names ActionRequested)."""
    names = avro.schema.Names()
    stem = filename.split(".")[0]
    version = filename.split(".")[1] if folder else ""
    chosen = dict(zip((f.split(".")[0] for f in schemas.history_versions()[version]),
                      schemas.history_versions()[version])) if folder else {}
    for schema in schemas.SCHEMA_FILES:
        dep = schema.removesuffix(".avsc")
        if dep == stem:
            break
        if folder:
            if dep in chosen:
                avro.schema.make_avsc_object(schemas.load_raw(chosen[dep], folder), names)
        else:
            avro.schema.make_avsc_object(schemas.load_raw(schema), names)
    return avro.schema.make_avsc_object(schemas.load_raw(filename, folder), names)


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
