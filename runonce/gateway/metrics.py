"""Prometheus metrics of the gateway, on a registry of its own, served at ``/metrics``."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter


@dataclass
class GatewayMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.answered = Counter("runonce_gateway_calls", "Calls the gateway took, by tool and what the caller was "
                                "told (succeeded, failed, in_doubt, dropped, pending, held)", ["tool", "status"],
                                registry=self.registry)
        self.refused = Counter("runonce_gateway_refused", "Calls the gateway refused before publishing anything, "
                               "by agent (the token's holder), tool and why (not_allowed, unknown_tool)",
                               ["agent", "tool", "why"], registry=self.registry)
