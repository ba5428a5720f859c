"""librdkafka's statistics (``statistics.interval.ms``): one ``stats_cb`` per client parses the
JSON once an interval and hands the document to each of its readers (the lag gauge, the fetch
and group stall watches). A document that is not JSON reaches none of them."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Mapping, Protocol

log = logging.getLogger("runonce.kafka")

#: one statistics document, as librdkafka's STATISTICS.md describes it
Stats = Mapping[str, Any]


class StatsReader(Protocol):
    def on_stats(self, stats: Stats) -> None:
        """Read what it needs; a document without it (a client without a group, a topic not
        fetched yet) is not an error."""


def stats_callback(*readers: StatsReader) -> Callable[[str], None]:
    """The client's ``stats_cb``: the document parsed once, handed to each reader in turn."""
    def on_stats(stats_json: str) -> None:
        try:
            stats = json.loads(stats_json)
        except ValueError as exc:
            log.warning("librdkafka statistics that are not JSON, ignored: %s", exc)
            return
        if not isinstance(stats, dict):
            return
        for reader in readers:
            reader.on_stats(stats)
    return on_stats
