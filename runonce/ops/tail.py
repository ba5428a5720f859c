"""``runonce tail``: the topics as readable lines or JSON objects, one per record, filtered by
tool, reason, agent and broker time. What analysts tap (``actions.dropped`` above all)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Callable

from runonce.core.tenant import DEFAULT_TENANT
from runonce.errors import InvalidInput
from runonce.kafka import topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.kafka.record import Record
from runonce.wire.codec import Codec
from runonce.wire.headers import H_ERROR_MESSAGE, H_ERROR_TYPE, H_ORIGIN_OFFSET, H_ORIGIN_PARTITION, H_ORIGIN_TOPIC

TOPIC_BY_NAME = {"dropped": topics.DROPPED, "approved": topics.APPROVED, "dlq": topics.DLQ,
                 "results": topics.RESULTS, "requested": topics.REQUESTED, "held": topics.HELD,
                 "verdicts": topics.VERDICTS}


@dataclass(frozen=True, slots=True)
class Filter:
    """Keep a record only if it matches every field given (None: any)."""

    tool: str | None = None
    reason: str | None = None
    agent: str | None = None
    tenant: str | None = None

    def keeps(self, view: dict[str, Any]) -> bool:
        return all(want is None or view.get(field) == want
                   for field, want in (("tool", self.tool), ("reason", self.reason), ("agent", self.agent),
                                       ("tenant", self.tenant)))


def view(codec: Codec, record: Record, *, dead_letters: bool | None = None) -> dict[str, Any]:
    """One record as a flat JSON-able object: what it is, about which action, and where it sits.
    ``dead_letters``: read it as a dead letter (default: if it comes from actions.dlq)."""
    base: dict[str, Any] = {
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "broker_time": dt.datetime.fromtimestamp(record.timestamp_ms / 1000, dt.timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z"),
    }
    if record.topic == topics.DLQ if dead_letters is None else dead_letters:
        h = {k: v.decode("utf-8", "replace") for k, v in record.headers}
        return {**base, "kind": "dead_letter", "error_type": h.get(H_ERROR_TYPE),
                "error": h.get(H_ERROR_MESSAGE),
                "origin": {"topic": h.get(H_ORIGIN_TOPIC), "partition": _int(h.get(H_ORIGIN_PARTITION)),
                           "offset": _int(h.get(H_ORIGIN_OFFSET))}}
    try:
        name, rec = codec.decode(record.value)
    except InvalidInput as exc:
        return {**base, "kind": "unreadable", "error": str(exc)}
    if name == "ActionDecision":
        req = rec["request"]
        out = {**base, "kind": "decision", "decision": rec["outcome"], "reason": rec["reason"], "tool": req["tool"],
               "agent": req["agent_id"], "tenant": req.get("tenant") or DEFAULT_TENANT, "action_id": req["action_id"],
               "idempotency_key": req["idempotency_key"], "key": rec["dedup_key"], "matched": rec["matched_key"], "window_ms": rec["window_ms"],
               "unkeyed": rec["unkeyed"], "repeats": None,
               # held for approval (and what was released, denied or expired): why, until when, by whom
               "hold_why": rec.get("hold_why"), "hold_expires_at_ms": rec.get("hold_expires_at_ms"),
               "verdict_by": rec.get("verdict_by")}
        if rec["first_action_id"]:
            out["repeats"] = {"action_id": rec["first_action_id"], "partition": rec["first_partition"],
                              "offset": rec["first_offset"]}
        return out
    if name == "VerdictDecided":
        return {**base, "kind": "verdict", "action_id": rec["action_id"], "verdict_id": rec["verdict_id"],
                "verdict": rec["verdict"], "approver": rec["approver"], "change": rec["change"],
                "status": rec["status"], "decided_by": rec["decided_by"], "note": rec["note"],
                "reason": rec["reason"]}
    if name == "ActionResult":
        return {**base, "kind": "result", "status": rec["status"], "tool": rec["tool"], "action_id": rec["action_id"],
                "idempotency_key": rec["idempotency_key"], "vendor_ref": rec["vendor_ref"], "error": rec["error"],
                "attempts": rec["attempts"]}
    return {**base, "kind": "request", "tool": rec["tool"], "agent": rec["agent_id"],
            "tenant": rec.get("tenant") or DEFAULT_TENANT, "action_id": rec["action_id"],
            "idempotency_key": rec["idempotency_key"], "natural_id": rec["natural_id"],
            "params": _params(rec["params_json"])}


def _int(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def line(v: dict[str, Any]) -> str:
    """The same object as one readable line."""
    kind = v["kind"]
    if kind == "dead_letter":
        o = v["origin"]
        return f"DLQ   {v['error_type'] or '?':<16} from {o['topic']}[{o['partition']}]@{o['offset']}: {v['error'] or ''}"
    if kind == "unreadable":
        return f"???   {v['error']}"
    if kind == "result":
        return (f"{v['status'].upper():<10} {v['tool']:<24} action {v['action_id']} vendor_ref={v['vendor_ref']} "
                f"attempts={v['attempts']}{' error=' + v['error'] if v['error'] else ''}")
    if kind == "verdict":
        return (f"VERDICT {v['verdict'] or 'expiry':<7} by {v['approver']:<16} action {v['action_id']} -> "
                f"{v['change']}{' (' + v['note'] + ')' if v['note'] else ''}")
    if kind == "request":
        params = json.dumps(v["params"], sort_keys=True)[:80]
        return f"REQ   {v['tool']:<24} action {v['action_id']} key={v['idempotency_key']} params={params}"
    text = f"{v['decision']:<9} {v['reason']:<21} {v['tool']:<24} action {v['action_id']}"
    if v["repeats"]:
        r = v["repeats"]
        text += f" repeats {r['action_id']} (requested[{r['partition']}]@{r['offset']})"
    if v["matched"]:
        text += f" on {v['matched']}"
    if v["window_ms"]:
        text += f" within {v['window_ms'] // 1000}s"
    if v["unkeyed"]:
        text += " [unkeyed]"
    if v.get("hold_why"):
        text += f" held: {v['hold_why']}"
    if v.get("verdict_by"):
        text += f" by {v['verdict_by']}"
    return text


def tail(bootstrap: KafkaTarget, which: str, *, follow: bool = False, limit: int = 0, as_json: bool = False,
         keep: Filter = Filter(), since_ms: int | None = None, until_ms: int | None = None,
         out: Callable[[str], None] = lambda s: print(s, flush=True)) -> int:
    """Print the records of one topic; returns how many were shown."""
    codec = Codec()
    topic = TOPIC_BY_NAME[which]
    shown = 0
    try:
        for record in read_all(bootstrap, topic, follow=follow, since_ms=since_ms, until_ms=until_ms):
            v = view(codec, record)
            if not keep.keeps(v):
                continue
            out(json.dumps(v) if as_json else line(v))
            shown += 1
            if limit and shown >= limit:
                break
    except KeyboardInterrupt:
        pass
    return shown


def _params(params_json: str) -> Any:
    """A request's params as JSON, or as the text it is when it is not JSON (it was dead-lettered)."""
    try:
        return json.loads(params_json)
    except (ValueError, RecursionError):
        return params_json
