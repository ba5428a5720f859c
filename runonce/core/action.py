"""An action as the core sees it: validated, with its params parsed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from runonce.core.content import canonical_json, content_hash
from runonce.errors import InvalidAction

MAX_PARAMS_BYTES = 256 * 1024
MAX_KEY_CHARS = 512


@dataclass(frozen=True, slots=True)
class Action:
    action_id: str
    agent_id: str
    tool: str
    params: Mapping[str, Any]
    idempotency_key: str | None
    natural_id: str | None
    requested_at_ms: int
    #: sha256 of tool + canonical params; computed once at construction
    content_hash: str

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Action:
        """Build from a decoded ActionRequested record; InvalidAction names what is wrong."""
        action_id = record.get("action_id") or ""
        tool = record.get("tool") or ""
        if not action_id.strip():
            raise InvalidAction("action_id is empty")
        if not tool.strip():
            raise InvalidAction(f"action {action_id}: tool is empty")
        params_json = record.get("params_json") or ""
        if len(params_json.encode("utf-8")) > MAX_PARAMS_BYTES:
            raise InvalidAction(f"action {action_id}: params_json is {len(params_json)} bytes, over {MAX_PARAMS_BYTES}")
        try:
            params = json.loads(params_json)
        except ValueError as exc:
            raise InvalidAction(f"action {action_id}: params_json is not JSON: {exc}") from exc
        if not isinstance(params, dict):
            raise InvalidAction(f"action {action_id}: params_json must be a JSON object, got {type(params).__name__}")
        key = record.get("idempotency_key")
        if key is not None and (not key.strip() or len(key) > MAX_KEY_CHARS):
            raise InvalidAction(f"action {action_id}: idempotency_key must be 1..{MAX_KEY_CHARS} non-blank chars")
        try:
            chash = content_hash(tool, params)
        except ValueError as exc:  # NaN/Infinity
            raise InvalidAction(f"action {action_id}: params cannot be canonicalized: {exc}") from exc
        return cls(
            action_id=action_id,
            agent_id=record.get("agent_id") or "",
            tool=tool,
            params=params,
            idempotency_key=key,
            natural_id=record.get("natural_id"),
            requested_at_ms=int(record.get("requested_at_ms") or 0),
            content_hash=chash,
        )

    def to_record(self) -> dict[str, Any]:
        return {
            "action_id": self.action_id,
            "agent_id": self.agent_id,
            "tool": self.tool,
            "params_json": canonical_json(dict(self.params)),
            "idempotency_key": self.idempotency_key,
            "natural_id": self.natural_id,
            "requested_at_ms": self.requested_at_ms,
        }
