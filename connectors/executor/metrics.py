"""Prometheus metrics of one executor, on a registry of its own."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

from runonce.kafka.lag import lag_gauge


@dataclass
class ExecutorMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.outcomes = Counter("runonce_executor_outcomes", "Executor outcomes by vendor, tool and status "
                                "(succeeded, failed, in_doubt, already_done, blocked_duplicate)",
                                ["vendor", "tool", "status"], registry=self.registry)
        self.lag = lag_gauge(self.registry)
        self.vendor_waiting = Gauge("runonce_vendor_calls_waiting", "Vendor calls waiting for the vendor's "
                                    "rate limit or a pause it asked for (429 Retry-After), by vendor",
                                    ["vendor"], registry=self.registry)
        self.vendor_refusals = Counter("runonce_vendor_rate_limited", "Calls the vendor refused for its rate "
                                       "limit (429), each pausing every call to it", ["vendor"],
                                       registry=self.registry)
