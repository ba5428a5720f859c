"""Prometheus metrics of one stream worker, on a registry of its own (no globals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from runonce.core.decision import Outcome, Reason
from runonce.kafka.lag import lag_gauge


@dataclass
class StreamMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.decisions = Counter("runonce_decisions", "Final decisions by outcome, reason and tool",
                                 ["outcome", "reason", "tool"], registry=r)
        self.unkeyed = Counter("runonce_unkeyed_actions", "Actions that arrived without an idempotency key",
                               ["tool"], registry=r)
        self.dead_letters = Counter("runonce_dead_letters", "Records sent to actions.dlq", ["kind"], registry=r)
        self.rekeyed = Counter("runonce_rekeyed", "Records re-keyed because they arrived on another key's partition",
                               registry=r)
        self.replays = Counter("runonce_replays", "Redelivered actions decided again (at-least-once)", ["stage"],
                               registry=r)
        self.expired = Counter("runonce_state_expired", "State entries deleted after their window", ["table"],
                               registry=r)
        self.latency = Histogram("runonce_decision_seconds", "Time to decide one record, per stage", ["stage"],
                                 buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1),
                                 registry=r)
        self.age = Histogram("runonce_decision_latency_seconds", "From request (broker append time) to final "
                             "decision", buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
                             registry=r)
        # The transactional runtime: what a commit carried, and what restores cost.
        self.transactions = Counter("runonce_transactions", "Stream transactions by result (committed, aborted)",
                                    ["result"], registry=r)
        self.batch_records = Histogram("runonce_batch_records", "Input records per committed transaction",
                                       buckets=(1, 10, 50, 100, 250, 500, 1000, 2000, 5000), registry=r)
        self.commit_seconds = Histogram("runonce_commit_seconds", "Time to commit one transaction",
                                        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
                                        registry=r)
        self.step_seconds = Histogram("runonce_transaction_step_seconds", "Time a committed stream transaction "
                                      "spent in each step: decide (its batch's processing), then the commit "
                                      "path's produce, flush, offsets and commit", ["step"],
                                      buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
                                      registry=r)
        self.batch_cap = Gauge("runonce_batch_cap_records", "Records the next transaction may take (cut after "
                               "a transaction the broker did not take in time)", registry=r)
        self.lag = lag_gauge(r)
        self.restored = Counter("runonce_state_restored", "Changelog records applied to local state on "
                                "assignment, per table", ["table"], registry=r)
        self.held = Counter("runonce_actions_held", "Actions held for a person's approval", ["tool"], registry=r)
        self.holds_ended = Counter("runonce_holds_ended", "Holds ended, by change (release, deny, expire)",
                                   ["change"], registry=r)
        self.holds_waiting = Gauge("runonce_holds_waiting", "Actions held on this worker's partitions, waiting "
                                   "for a person", registry=r)
        self.hold_oldest = Gauge("runonce_hold_oldest_seconds", "How long the oldest action held on this "
                                 "worker's partitions has waited (0: none)", registry=r)

    def expect(self, budgeted_tools: Iterable[str], dead_letter_kinds: Iterable[str]) -> None:
        """Series at 0 for what the alerts watch, before the first one happens: ``increase()`` over
        a series that first appears at 42 is 0, and the alert would miss the first restart loop."""
        for tool in budgeted_tools:
            self.decisions.labels(Outcome.DROP.value, Reason.BUDGET_EXHAUSTED.value, tool)
        for kind in dead_letter_kinds:
            self.dead_letters.labels(kind)
