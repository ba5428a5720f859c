"""Prometheus metrics of one executor, on a registry of its own."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter

from runonce.kafka.lag import lag_gauge


@dataclass
class ExecutorMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.outcomes = Counter("runonce_executor_outcomes", "Executor outcomes by vendor, tool and status "
                                "(succeeded, failed, in_doubt, already_done, blocked_duplicate)",
                                ["vendor", "tool", "status"], registry=self.registry)
        self.lag = lag_gauge(self.registry)
