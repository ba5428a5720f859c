"""The Avro contract. The ``.avsc`` files beside this module are the source of truth;
``history/`` keeps each schema's previous versions for the compatibility test."""

from __future__ import annotations

if __name__ != "runonce.schemas":  # the folder is runonce.schemas (runonce/schemas links here); one import path only
    raise ImportError(f"import runonce.schemas, not {__name__}: a second copy of these modules would have "
                      "Enums, settings and state of its own")

import json
from importlib import resources
from typing import Any

#: load order matters: a schema may name a record defined by an earlier one
SCHEMA_FILES = ("action_requested.avsc", "action_decision.avsc", "action_result.avsc", "approval_verdict.avsc",
                "verdict_decided.avsc", "action_cancel.avsc")


def load_raw(filename: str, folder: str = "") -> dict[str, Any]:
    """The JSON of one schema file, as written."""
    path = resources.files(__name__)
    if folder:
        path = path / folder
    data: dict[str, Any] = json.loads((path / filename).read_text(encoding="utf-8"))
    return data


def history_files() -> list[str]:
    return sorted(p.name for p in (resources.files(__name__) / "history").iterdir() if p.name.endswith(".avsc"))


def history_versions() -> dict[str, list[str]]:
    """Each previous version's files, in SCHEMA_FILES order; a schema without that version
    is taken at its newest version before it (what the version's records named)."""
    files = history_files()
    versions = sorted({f.split(".")[1] for f in files}, key=lambda v: int(v.lstrip("v")))
    out: dict[str, list[str]] = {}
    for version in versions:
        chosen = []
        for schema in SCHEMA_FILES:
            stem = schema.removesuffix(".avsc")
            older = [f for f in files if f.split(".")[0] == stem
                     and int(f.split(".")[1].lstrip("v")) <= int(version.lstrip("v"))]
            if older:
                chosen.append(max(older, key=lambda f: int(f.split(".")[1].lstrip("v"))))
        out[version] = chosen
    return out
