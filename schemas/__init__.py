"""The Avro contract. The ``.avsc`` files beside this module are the source of truth;
``history/`` keeps each schema's previous versions for the compatibility test."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

#: load order matters: a schema may name a record defined by an earlier one
SCHEMA_FILES = ("action_requested.avsc", "action_decision.avsc", "action_result.avsc")


def load_raw(filename: str, folder: str = "") -> dict[str, Any]:
    """The JSON of one schema file, as written."""
    path = resources.files(__name__)
    if folder:
        path = path / folder
    data: dict[str, Any] = json.loads((path / filename).read_text(encoding="utf-8"))
    return data


def history_files() -> list[str]:
    return sorted(p.name for p in (resources.files(__name__) / "history").iterdir() if p.name.endswith(".avsc"))
