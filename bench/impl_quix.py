"""The same dedup written with Quix Streams: what a user would pick instead.

Same input bytes, same decisions, same topology as runonce's stream job: it calls runonce's
pure core (``decide_key``; then, only for actions that pass stage 1 because their tool has
scope rules, ``decide_scope`` after a ``group_by`` on the scope, runonce's hop through
runonce.internal.scoped); everything else goes straight to the output. The bench's records
are keyed by their idempotency key, so none needs runonce's re-key hop here either. The
comparison measures the runtime, not the logic. State in RocksDB (Quix's own stores, one
per partition, changelogged), processing_guarantee="exactly-once". Knobs: commit_interval
1 s (Quix's default is 5 s); the repartition topic of ``group_by`` is JSON (Quix's default),
so the Avro bytes ride in it as a latin-1 string; everything else default.

    python bench/impl_quix.py BOOTSTRAP IN_TOPIC OUT_TOPIC STATE_DIR
"""

from __future__ import annotations

import sys
from typing import Any

from quixstreams import Application

from runonce.core.action import Action
from runonce.core.decide import decide_key, decide_scope, dedup_key
from runonce.core.decision import KeyState, Origin, Outcome, ScopeState
from runonce.core.policy import PolicyBook
from runonce.core.tenant import scoped
from runonce.errors import InvalidInput
from runonce.streams.records import decision_record, stage2_record
from runonce.wire.codec import Codec

codec = Codec()
policies = PolicyBook.load()


def stage1(value: bytes, key: Any, timestamp: int, headers: Any, state: Any) -> dict[str, Any]:
    try:
        _, record = codec.decode(value, expect="ActionRequested")
        action = Action.from_record(record)
        policy = policies.for_tool(action.tool)
        scope = policy.scope_key(action.params, action.action_id) if policy.has_scope_rules else None
    except InvalidInput as exc:
        return {"outcome": "DLQ", "error": str(exc), "scope": None, "bytes": value.decode("latin-1")}
    k = dedup_key(action, policy)
    origin = Origin(0, 0, timestamp)
    prior_raw = state.get(k) if k else None
    prior = KeyState.from_bytes(prior_raw) if prior_raw else None
    d = decide_key(action, prior, policy=policy, key=k, origin=origin)
    if d.new_state is not None and k:
        state.set(k, d.new_state.to_bytes().decode())  # Quix state values are JSON
    out = decision_record(record, d, dedup_key=k, content_hash=action.content_hash,
                          unkeyed=action.idempotency_key is None, origin=origin)
    # group_by repartitions through a JSON topic: carry the Avro bytes as a latin-1 string.
    return {"outcome": d.outcome.value, "scope": scope,
            "bytes": codec.encode("ActionDecision", out).decode("latin-1")}


def stage2(value: dict[str, Any], key: Any, timestamp: int, headers: Any, state: Any) -> dict[str, Any]:
    _, record = codec.decode(value["bytes"].encode("latin-1"), expect="ActionDecision")
    action = Action.from_record(record["request"])
    policy = policies.for_tool(action.tool)
    scope = value["scope"]
    nid = policy.natural_id_for(action.params, action.natural_id, action.action_id)
    raw = state.get(scope)
    prior = ScopeState.from_bytes(raw) if raw else None
    d = decide_scope(action, prior, policy=policy, scope=scope, natural_id=nid,
                     origin=Origin(0, 0, record["event_time_ms"]))
    if d.new_state is not None:
        state.set(scope, d.new_state.to_bytes().decode())
    return {"outcome": d.outcome.value, "scope": scope,
            "bytes": codec.encode("ActionDecision", stage2_record(record, d, scoped(action.tenant, nid) if nid else None)).decode("latin-1")}


def main() -> None:
    bootstrap, in_topic, out_topic, state_dir = sys.argv[1:5]
    app = Application(broker_address=bootstrap, consumer_group="bench-quix", auto_offset_reset="earliest",
                      processing_guarantee="exactly-once", state_dir=state_dir, commit_interval=1.0,
                      loglevel="WARNING")
    source = app.topic(in_topic, key_deserializer="bytes", value_deserializer="bytes")
    sink = app.topic(out_topic, key_serializer="bytes", value_serializer="bytes")
    sdf = app.dataframe(source)
    sdf = sdf.apply(stage1, stateful=True, metadata=True)
    # Two branches: decided at stage 1 (out at once), or passed to stage 2, re-keyed by scope
    # so the owner of the scope decides it.
    final = sdf.filter(lambda v: v["outcome"] != Outcome.PASS.value)
    final.apply(lambda v: v["bytes"].encode("latin-1")).to_topic(sink)
    passed = sdf.filter(lambda v: v["outcome"] == Outcome.PASS.value)
    passed = passed.group_by(lambda v: v["scope"], name="scope")
    passed = passed.apply(stage2, stateful=True, metadata=True)
    passed.apply(lambda v: v["bytes"].encode("latin-1")).to_topic(sink)
    app.run()


if __name__ == "__main__":
    main()
