"""An action as the core sees it: validated, with its params parsed into their normal form
(``normal.py``). Every bound is in ``limits.py``; every way a request can be refused is an
InvalidAction here, naming the field."""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from runonce.core import limits
from runonce.core.content import content_hash
from runonce.core.normal import nfc
from runonce.core.tenant import DEFAULT_TENANT, check_tenant
from runonce.errors import InvalidAction

if TYPE_CHECKING:
    from runonce.core.policy import PolicyBook


def _bounded(record: Mapping[str, Any], field: str, max_chars: int, action_id: str, *,
             required: bool = False) -> str | None:
    value = record.get(field)
    if value is None or (value == "" and not required):
        return value if value is None else ""
    if not isinstance(value, str):
        raise InvalidAction(f"action {action_id}: {field} must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise InvalidAction(f"action {action_id}: {field} is {len(value)} chars, over the limit of {max_chars}")
    return value


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique in NFC: with two ``to`` keys, which one is the recipient?"""
    out: dict[str, Any] = {}
    for key, value in pairs:
        norm = key if key.isascii() or unicodedata.is_normalized("NFC", key) else unicodedata.normalize("NFC", key)
        if norm in out:
            raise ValueError(f"duplicate key {norm[:80]!r}")
        out[norm] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


#: made once: ``json.loads`` with any option builds a new decoder at each call
_PARAMS = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_refuse_constant)


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in node)
    return deepest


def parse_params(params_json: str, action_id: str) -> dict[str, Any]:
    """params_json as a JSON object: bounded in bytes and depth, no NaN/Infinity, no duplicate keys."""
    size = len(params_json.encode("utf-8", "surrogatepass"))
    if size > limits.MAX_PARAMS_BYTES:
        raise InvalidAction(f"action {action_id}: params_json is {size} bytes, over the limit of "
                            f"{limits.MAX_PARAMS_BYTES}")
    try:
        params = _PARAMS.decode(params_json)
    except RecursionError:  # deeper than the interpreter's stack: far past MAX_JSON_DEPTH
        raise InvalidAction(f"action {action_id}: params_json is nested deeper than {limits.MAX_JSON_DEPTH}") from None
    except ValueError as exc:
        raise InvalidAction(f"action {action_id}: params_json is not JSON: {exc}") from exc
    if not isinstance(params, dict):
        raise InvalidAction(f"action {action_id}: params_json must be a JSON object, got {type(params).__name__}")
    if _depth(params) > limits.MAX_JSON_DEPTH:
        raise InvalidAction(f"action {action_id}: params_json is nested deeper than {limits.MAX_JSON_DEPTH}")
    return params


@dataclass(frozen=True, slots=True)
class Action:
    action_id: str
    agent_id: str
    tool: str
    #: the params in their normal form (normal.py): what decisions compare, not what is executed
    params: Mapping[str, Any]
    idempotency_key: str | None
    natural_id: str | None
    requested_at_ms: int
    #: sha256 of tool + canonical normal-form params; computed once at construction
    content_hash: str
    #: whose keys, windows and results these are (core/tenant.py)
    tenant: str = DEFAULT_TENANT

    @classmethod
    def from_record(cls, record: Mapping[str, Any], policies: PolicyBook | None = None) -> Action:
        """Build from a decoded ActionRequested record; InvalidAction names what is wrong.
        ``policies``: the tool's policy puts its fields in their normal forms (without it,
        strings are only NFC)."""
        raw_id = record.get("action_id")
        action_id = raw_id[:80] if isinstance(raw_id, str) else "?"  # for messages, before it is checked
        checked_id = _bounded(record, "action_id", limits.MAX_ACTION_ID_CHARS, action_id, required=True)
        if not checked_id or not checked_id.strip():
            raise InvalidAction("action_id is empty")
        if not checked_id.isprintable():
            raise InvalidAction(f"action_id {checked_id[:80]!r} has control characters")
        action_id = checked_id
        tool = _bounded(record, "tool", limits.MAX_TOOL_CHARS, action_id, required=True)
        if not tool or not tool.strip():
            raise InvalidAction(f"action {action_id}: tool is empty")
        if not tool.isprintable():
            raise InvalidAction(f"action {action_id}: tool {tool[:80]!r} has control characters")
        agent_id = _bounded(record, "agent_id", limits.MAX_AGENT_ID_CHARS, action_id) or ""
        tenant = check_tenant(record.get("tenant") or DEFAULT_TENANT, action_id)
        natural_id = _bounded(record, "natural_id", limits.MAX_NATURAL_ID_CHARS, action_id)
        key = record.get("idempotency_key")
        if key is not None and (not isinstance(key, str) or not key.strip() or len(key) > limits.MAX_KEY_CHARS):
            raise InvalidAction(f"action {action_id}: idempotency_key must be 1..{limits.MAX_KEY_CHARS} "
                                "non-blank chars")
        params = parse_params(record.get("params_json") or "", action_id)
        if policies is not None:
            params = policies.for_tool(tool).identity(params, action_id)
        else:
            params = nfc(params)
        try:
            chash = content_hash(tool, params)
        except ValueError as exc:  # a lone surrogate (a "\ud800" escape) has no UTF-8 form
            raise InvalidAction(f"action {action_id}: params cannot be canonicalized: {exc}") from exc
        return cls(
            action_id=action_id,
            agent_id=agent_id,
            tool=tool,
            params=params,
            idempotency_key=key,
            natural_id=unicodedata.normalize("NFC", natural_id) if natural_id else natural_id,
            requested_at_ms=int(record.get("requested_at_ms") or 0),
            content_hash=chash,
            tenant=tenant,
        )

