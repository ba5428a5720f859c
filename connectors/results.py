"""What an executor knows about past attempts: the latest result per action id (and which
action first used each vendor key), restored from ``actions.results`` for the partitions it
owns. Results are written to the same partition number as the approved record, so the
owner of approved partition p is the only writer of results partition p."""

from __future__ import annotations

import logging

from runonce.errors import InvalidInput
from runonce.kafka import topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.wire.codec import Codec
from runonce.wire.keys import request_key
from runonce.wire.results import Result, result_of

log = logging.getLogger("runonce.executor")


class ResultIndex:
    def __init__(self, bootstrap: KafkaTarget, tools: frozenset[str], codec: Codec | None = None,
                 timeout_s: float = 60.0) -> None:
        self.bootstrap = bootstrap
        self.tools = tools
        self.codec = codec or Codec()
        self.timeout_s = timeout_s
        self.by_action: dict[str, Result] = {}
        #: vendor key -> the action id that first used it (second line of defense)
        self.by_key: dict[str, str] = {}
        #: records on actions.results that are no ActionResult (a foreign writer's), counted and logged
        self.unreadable = 0

    def put(self, action_id: str, vendor_key: str, result: Result) -> None:
        self.by_action[action_id] = result
        self.by_key.setdefault(vendor_key, action_id)

    def restore(self, partitions: list[int]) -> int:
        """Read results partitions to their end (read_committed); returns records applied."""
        if not partitions:
            return 0
        applied = 0
        for record in read_all(self.bootstrap, topics.RESULTS, self.timeout_s, partitions=partitions):
            if record.value is None:
                continue
            try:
                _, r = self.codec.decode(record.value, expect="ActionResult")
            except InvalidInput as exc:  # not an executor's: it tells nothing about any action
                self.unreadable += 1
                log.warning("results: skipped an unreadable record at %s[%d]@%d: %s",
                            record.topic, record.partition, record.offset, exc)
                continue
            if r["tool"] in self.tools:
                self.put(r["action_id"], request_key(r), result_of(r))
                applied += 1
        return applied

