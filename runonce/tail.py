"""``runonce tail``: the topics as readable lines, one per record."""

from __future__ import annotations

from typing import Any

from runonce.codec import Codec
from runonce.errors import InvalidInput
from runonce.kafka import topics
from runonce.kafka.access import Bootstrap
from runonce.topic_reader import read_all

TOPIC_BY_NAME = {"dropped": topics.DROPPED, "approved": topics.APPROVED, "dlq": topics.DLQ,
                 "results": topics.RESULTS, "requested": topics.REQUESTED}


def format_record(codec: Codec, topic: str, value: bytes | None, headers: list[tuple[str, bytes]]) -> str:
    if topic == topics.DLQ:
        h = {k: v.decode("utf-8", "replace") for k, v in headers}
        return (f"DLQ   {h.get('runonce.error.type', '?'):<16} from {h.get('runonce.origin.topic')}"
                f"[{h.get('runonce.origin.partition')}]@{h.get('runonce.origin.offset')}: "
                f"{h.get('runonce.error.message', '')}")
    try:
        name, rec = codec.decode(value)
    except InvalidInput as exc:
        return f"???   {exc}"
    if name == "ActionDecision":
        return _decision_line(rec)
    if name == "ActionResult":
        return (f"{rec['status'].upper():<10} {rec['tool']:<24} action {rec['action_id']} "
                f"vendor_ref={rec['vendor_ref']} attempts={rec['attempts']}{' error=' + rec['error'] if rec['error'] else ''}")
    return f"REQ   {rec['tool']:<24} action {rec['action_id']} key={rec['idempotency_key']} params={rec['params_json'][:80]}"


def _decision_line(d: dict[str, Any]) -> str:
    req = d["request"]
    line = f"{d['outcome']:<9} {d['reason']:<21} {req['tool']:<24} action {req['action_id']}"
    if d["first_action_id"]:
        line += f" repeats {d['first_action_id']} (requested[{d['first_partition']}]@{d['first_offset']})"
    if d["matched_key"]:
        line += f" on {d['matched_key']}"
    if d["window_ms"]:
        line += f" within {d['window_ms'] // 1000}s"
    if d["unkeyed"]:
        line += " [unkeyed]"
    return line


def tail(bootstrap: Bootstrap, which: str, *, follow: bool = False, limit: int = 0) -> int:
    codec = Codec()
    topic = TOPIC_BY_NAME[which]
    shown = 0
    try:
        for record in read_all(bootstrap, topic, follow=follow):
            print(format_record(codec, topic, record.value, list(record.headers)), flush=True)
            shown += 1
            if limit and shown >= limit:
                break
    except KeyboardInterrupt:
        pass
    return 0
