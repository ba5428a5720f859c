"""Consumer lag from librdkafka's statistics (runonce/kafka/lag.py) into a real Prometheus gauge."""

from __future__ import annotations

import json
from typing import Any, Mapping

from prometheus_client import CollectorRegistry, Gauge

from runonce.kafka.lag import LagGauge
from runonce.kafka.stats import stats_callback


def _stats(parts: dict[str, dict[str, object]]) -> str:
    return json.dumps({"topics": {"actions.approved": {"partitions": {
        "-1": {"consumer_lag": -1, "fetch_state": "none"}, **parts}}}})


def _series(registry: CollectorRegistry) -> dict[str, float]:
    return {s.labels["partition"]: s.value for m in registry.collect() for s in m.samples
            if s.name == "runonce_consumer_lag_records"}


def test_lag_follows_the_fetched_partitions_and_drops_the_rest() -> None:
    registry = CollectorRegistry()
    lag = LagGauge(Gauge("runonce_consumer_lag_records", "lag", ["group", "topic", "partition"],
                         registry=registry), "runonce-exec-smtp")
    stats_callback(lag)(_stats({"0": {"consumer_lag": 12, "fetch_state": "active"},
                         "1": {"consumer_lag": 0, "fetch_state": "active"},
                         "2": {"consumer_lag": -1, "fetch_state": "offset-query"},  # not known yet
                         # idle since its assignment: no application offset, the fetch position at the end
                         "4": {"consumer_lag": -1, "fetch_state": "active", "ls_offset": 30, "next_offset": 30},
                         "3": {"consumer_lag": 40, "fetch_state": "none"}}))  # known, not fetched by us
    assert _series(registry) == {"0": 12.0, "1": 0.0, "4": 0.0}
    stats_callback(lag)(_stats({"1": {"consumer_lag": 5, "fetch_state": "active"}}))  # 0 revoked in a rebalance
    assert _series(registry) == {"1": 5.0}
    stats_callback(lag)("not json")
    assert _series(registry) == {"1": 5.0}


def test_one_stats_callback_parses_once_and_feeds_each() -> None:
    """Catches a reader handed the text to parse again, or one reader's document not the other's;
    a document that is not JSON reaches none."""
    heard: list[tuple[str, object]] = []

    class Reader:
        def __init__(self, name: str) -> None:
            self.name = name

        def on_stats(self, stats: Mapping[str, Any]) -> None:
            heard.append((self.name, stats))

    cb = stats_callback(Reader("a"), Reader("b"))
    cb('{"cgrp": {}}')
    cb("not json")
    assert [name for name, _ in heard] == ["a", "b"]
    assert heard[0][1] == {"cgrp": {}} and heard[0][1] is heard[1][1]
