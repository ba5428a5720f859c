"""Which tools the gateway serves, with what input schema and description: read from the
same policies the stream job decides with, so what a model is offered and what runonce
enforces cannot drift apart.

Denied tools are not listed: a model should not be offered a tool that can never run (and a
listed tool invites attempts). A call to one by name is still published, so the attempt is
recorded (dropped ``tool_denied``) where analysts look, and the model is told it is denied."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from runonce.core.policy import KeyMode, Policy, PolicyBook, format_duration

#: the argument a tool declares for the caller's idempotency key (taken out of the params)
KEY_ARGUMENT = "idempotency_key"


class Refusal(Enum):
    """Why the gateway took no call (nothing was published)."""

    UNKNOWN_TOOL = "unknown_tool"
    NOT_ALLOWED = "not_allowed"
    #: an HTTP call without the Idempotency-Key its tool's policy requires
    MISSING_KEY = "missing_key"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


def served_tools(policies: PolicyBook) -> list[ToolSpec]:
    return [spec_of(policies.for_tool(name)) for name in sorted(policies.tools)
            if not policies.for_tool(name).denied]


def spec_of(policy: Policy) -> ToolSpec:
    required = list(dict.fromkeys([*policy.scope, *(policy.natural_id.fields if policy.natural_id else ())]))
    properties: dict[str, Any] = {name: {"description": "identifies what the action touches: runonce decides "
                                                        "repeats per value of it"} for name in required}
    properties[KEY_ARGUMENT] = {
        "type": "string",
        "description": "The same key on a retry makes it a repeat: runonce performs the action once "
                       + ("(required)." if policy.key_mode is KeyMode.REQUIRE else
                          "(optional: without one, the content identifies a repeat)."
                          if policy.key_mode is KeyMode.DERIVE else "(optional)."),
    }
    if policy.key_mode is KeyMode.REQUIRE:
        required.append(KEY_ARGUMENT)
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": True}
    return ToolSpec(policy.tool, describe(policy), schema)


def describe(policy: Policy) -> str:
    """What runonce does with a call to this tool, in the words a model reads."""
    rules = []
    if policy.key_mode is not KeyMode.NONE:
        rules.append(f"a retry with the same idempotency key within {format_duration(policy.key_ttl_ms)} "
                     "returns the first call's result instead of acting again")
    if policy.key_mode is KeyMode.DERIVE:
        rules.append("without a key, an identical call counts as a retry")
    where = " + ".join(f"`{name}`" for name in policy.scope)
    if policy.natural_id:
        fields = " + ".join(f"`{name}`" for name in policy.natural_id.fields)
        rules.append(f"one per {fields} within {format_duration(policy.natural_id.ttl_ms)}")
    if policy.content_window:
        verb = "is dropped" if policy.content_window.mode.value == "strict" else "is performed and flagged"
        rules.append(f"the same content for the same {where} within "
                     f"{format_duration(policy.content_window.window_ms)} {verb}")
    if policy.budget:
        rules.append(f"at most {policy.budget.max_actions} per {where} every "
                     f"{format_duration(policy.budget.window_ms)}")
    return f"{policy.tool} through runonce: " + "; ".join(rules) + "."
