"""Consumer lag per partition, from librdkafka's own statistics (``statistics.interval.ms``):
``consumer_lag`` is the partition's end (its last stable offset, read_committed) less the
consumer's position, counted by the client itself, with no extra request to any broker.
Before a partition's first record since its assignment the client reports -1; then the
fetch position stands in for the position."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from runonce.kafka.stats import Stats


def lag_gauge(registry: CollectorRegistry) -> Gauge:
    """The one definition of the lag gauge: workers and executors export the same series, so a
    rule sums it by group across both."""
    return Gauge("runonce_consumer_lag_records", "Records not yet read, per consumer group and partition "
                 "(librdkafka's own count, to the last stable offset)", ["group", "topic", "partition"],
                 registry=registry)


class LagGauge:
    """Feeds a ``runonce_consumer_lag_records{group, topic, partition}`` gauge. A partition
    the consumer no longer fetches loses its series, so a group's sum never counts one twice
    after a rebalance."""

    def __init__(self, gauge: Any, group: str) -> None:
        self.gauge = gauge
        self.group = group
        self._shown: set[tuple[str, str]] = set()

    def on_stats(self, stats: Stats) -> None:
        topics = stats.get("topics")
        if not isinstance(topics, dict):
            return
        shown: set[tuple[str, str]] = set()
        for topic, t in topics.items():
            for p, d in t.get("partitions", {}).items():
                if int(p) < 0 or d.get("fetch_state") in (None, "none", "stopped"):
                    continue
                lag = d.get("consumer_lag", -1)
                if lag < 0 and d.get("ls_offset", -1) >= 0 and d.get("next_offset", -1) >= 0:
                    # nothing consumed since the assignment (no application offset yet): the
                    # fetch position is where the consumer stands
                    lag = max(0, d["ls_offset"] - d["next_offset"])
                if lag < 0:
                    continue
                self.gauge.labels(self.group, topic, p).set(lag)
                shown.add((topic, p))
        for topic, p in self._shown - shown:
            self.gauge.remove(self.group, topic, p)
        self._shown = shown
