"""Prometheus metrics of one executor, on a registry of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import AbstractSet, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge

from runonce.connectors.executor.batch import Plan, Work
from runonce.kafka.lag import lag_gauge
from runonce.wire.results import Result, Status


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


class OutcomeCounts:
    """``runonce_executor_outcomes_total`` of one vendor, told of each committed batch (none:
    counted nowhere, as in tests of the protocol)."""

    def __init__(self, outcomes: Counter | None = None, vendor: str = "", tools: AbstractSet[str] = frozenset()
                 ) -> None:
        self._outcomes, self._vendor = outcomes, vendor
        if outcomes is not None:  # every final status from the start at 0: "none in doubt" is a series too
            for tool in sorted(tools):
                for status in (Status.SUCCEEDED, Status.FAILED, Status.IN_DOUBT):
                    outcomes.labels(vendor, tool, status.value)

    @classmethod
    def of(cls, metrics: ExecutorMetrics | None, vendor: str, tools: AbstractSet[str]) -> OutcomeCounts:
        return cls(metrics.outcomes if metrics is not None else None, vendor, tools)

    def committed(self, batch: Sequence[Work], outcomes: Mapping[str, Result]) -> None:
        """Each plan that is an outcome of its own (dead-lettered, already done, recommitted,
        blocked) by its Plan's name, and each final status; skips count nowhere."""
        if self._outcomes is None:
            return
        for work in batch:
            if work.call is None:
                if work.plan is Plan.DEAD_LETTER:
                    self._count(Plan.DEAD_LETTER.value, "?")
                continue
            outcome = outcomes.get(work.call.action_id)
            if outcome is None:
                if work.plan is Plan.DONE:
                    self._count(Plan.DONE.value, work.call.tool)
                continue
            if work.plan in (Plan.RECOMMIT, Plan.BLOCKED):
                self._count(work.plan.value, work.call.tool)
            self._count(outcome.status.value, work.call.tool)

    def _count(self, status: str, tool: str) -> None:
        assert self._outcomes is not None
        self._outcomes.labels(self._vendor, tool, status).inc()
