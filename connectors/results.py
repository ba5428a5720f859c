"""What an executor knows about past attempts: the latest result per action id (and which
action first used each vendor key), restored from ``actions.results`` for the partitions it
owns. Results are written to the same partition number as the approved record, so the
owner of approved partition p is the only writer of results partition p."""

from __future__ import annotations

import time
from typing import Any

from runonce.connectors.runner import Outcome, Status
from runonce.kafka import topics
from runonce.kafka.access import Bootstrap
from runonce.kafka.reader import read_all
from runonce.wire.codec import Codec


class ResultIndex:
    def __init__(self, bootstrap: Bootstrap, tools: frozenset[str], codec: Codec | None = None,
                 timeout_s: float = 60.0) -> None:
        self.bootstrap = bootstrap
        self.tools = tools
        self.codec = codec or Codec()
        self.timeout_s = timeout_s
        self.by_action: dict[str, Outcome] = {}
        #: vendor key -> the action id that first used it (second line of defense)
        self.by_key: dict[str, str] = {}

    def put(self, action_id: str, vendor_key: str, outcome: Outcome) -> None:
        self.by_action[action_id] = outcome
        self.by_key.setdefault(vendor_key, action_id)

    def restore(self, partitions: list[int]) -> int:
        """Read results partitions to their end (read_committed); returns records applied."""
        if not partitions:
            return 0
        applied = 0
        for record in read_all(self.bootstrap, topics.RESULTS, self.timeout_s, partitions=partitions):
            if record.value is None:
                continue
            _, r = self.codec.decode(record.value, expect="ActionResult")
            if r["tool"] in self.tools:
                self.put(r["action_id"], r["idempotency_key"] or r["action_id"], from_record(r))
                applied += 1
        return applied


def from_record(r: dict[str, Any]) -> Outcome:
    return Outcome(Status(r["status"]), r["vendor_ref"], r["error"], r["attempts"])


def to_record(action_id: str, idempotency_key: str | None, tool: str, outcome: Outcome) -> dict[str, Any]:
    return {"action_id": action_id, "idempotency_key": idempotency_key, "tool": tool,
            "status": outcome.status.value, "vendor_ref": outcome.vendor_ref, "error": outcome.error,
            "attempts": outcome.attempts, "completed_at_ms": int(time.time() * 1000)}
