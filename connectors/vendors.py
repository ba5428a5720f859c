"""The connector that speaks only runonce's sandbox (kind ``sandbox-calendar``): its paths exist
in connectors/sandbox/http_vendors.py and at no real vendor. The kinds that reach real vendors
(Stripe, SMTP, Slack, Jira Cloud, Salesforce, Standard Webhooks, PostgreSQL) have files of their
own; writing one: docs/connectors.md."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
import ssl
from urllib.parse import quote

from runonce.connectors.base import ActionCall, Capability, NoStateCheck, VendorResponse
from runonce.connectors.errors import PermanentVendorError
from runonce.connectors.config import VendorFields
from runonce.connectors.tls import client_context
from runonce.connectors.transport import http_json


def _digest(text: str, n: int = 24) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _param(call: ActionCall, name: str) -> str:
    value = call.params.get(name)
    if value is None or value == "":
        raise PermanentVendorError(f"{call.tool}: params field {name!r} is required")
    return str(value)


@dataclass
class CalendarConnector(NoStateCheck):
    """Events get a client-chosen id derived from the vendor key: inserting it twice is a no-op."""

    base_url: str
    timeout_s: float = 30.0
    name: str = "calendar"
    tools: frozenset[str] = frozenset({"schedule_calendar_event"})
    tls: ssl.SSLContext | None = None
    capability = Capability.VENDOR_KEY

    def perform(self, call: ActionCall) -> VendorResponse:
        event_id = f"ro{_digest(call.vendor_key, 20)}"
        cal = quote(_param(call, "calendar_id"), safe="")
        res = http_json("PUT", f"{self.base_url}/calendar/{cal}/events/{event_id}", dict(call.params),
                        timeout_s=self.timeout_s, tls=self.tls)
        return VendorResponse(str(res.body["id"]), str(res.body.get("status", "")))


def calendar(fields: VendorFields) -> CalendarConnector:
    return CalendarConnector(fields.url("base_url"), fields.timeout_s, fields.name,
                             fields.tools(CalendarConnector.tools), _tls(fields))


def _tls(fields: VendorFields) -> ssl.SSLContext:
    return client_context(fields.ca_file)
