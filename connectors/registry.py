"""Which connector serves which tool, built from settings."""

from __future__ import annotations

from typing import Callable

from runonce.connectors.base import Connector
from runonce.connectors.vendors import (CalendarConnector, JiraConnector, PaymentsConnector, SalesforceConnector,
                                        SlackConnector, SmtpConnector, WebhookConnector)
from runonce.errors import ConfigError
from runonce.settings import Settings


def _smtp(settings: Settings) -> Connector:
    host, port = settings.smtp_endpoint
    return SmtpConnector(host, port)


FACTORIES: dict[str, Callable[[Settings], Connector]] = {
    "smtp": _smtp,
    "webhook": lambda s: WebhookConnector(s.vendor_url, hook="ops"),
    "payments": lambda s: PaymentsConnector(s.vendor_url),
    "slack": lambda s: SlackConnector(s.vendor_url),
    "jira": lambda s: JiraConnector(s.vendor_url, check_lag_s=s.jira_search_lag_ms / 1000),
    "calendar": lambda s: CalendarConnector(s.vendor_url),
    "salesforce": lambda s: SalesforceConnector(s.vendor_url),
}


def build(vendor: str, settings: Settings) -> Connector:
    try:
        factory = FACTORIES[vendor]
    except KeyError:
        raise ConfigError(f"unknown vendor {vendor!r}; known: {', '.join(sorted(FACTORIES))}") from None
    return factory(settings)
