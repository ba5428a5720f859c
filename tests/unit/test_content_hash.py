from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runonce.core.action import Action
from runonce.core.content import canonical_json, content_hash

json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=12) | st.floats(allow_nan=False,
                                                                                        allow_infinity=False)
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)
params_strategy = st.dictionaries(st.text(max_size=8), json_value, max_size=8)


def _shuffled(value: Any, rnd: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rnd) for v in value]
    return value


@given(params_strategy, st.integers())
def test_key_order_never_changes_the_content_hash(params: dict[str, Any], seed: int) -> None:
    reordered = _shuffled(params, random.Random(seed))
    assert content_hash("send_email", reordered) == content_hash("send_email", params)


@given(params_strategy, st.integers())
def test_action_hash_ignores_how_the_agent_serialized_params(params: dict[str, Any], seed: int) -> None:
    def record(text: str) -> dict[str, Any]:
        return {"action_id": "a", "tool": "t", "params_json": text, "requested_at_ms": 0}

    pretty = json.dumps(_shuffled(params, random.Random(seed)), indent=2)
    assert Action.from_record(record(pretty)).content_hash == Action.from_record(record(canonical_json(params))).content_hash


@given(params_strategy)
def test_tool_is_part_of_the_hash(params: dict[str, Any]) -> None:
    assert content_hash("send_email", params) != content_hash("post_slack_message", params)


def test_different_values_hash_differently() -> None:
    assert content_hash("t", {"to": "a"}) != content_hash("t", {"to": "b"})
