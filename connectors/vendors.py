"""The connectors that speak only runonce's sandbox (kinds ``sandbox-webhook``, ``sandbox-slack``,
``sandbox-jira``, ``sandbox-calendar``, ``sandbox-salesforce``): their paths exist in
connectors/sandbox/http_vendors.py and at no real vendor. Stripe and SMTP, the kinds that
reach real vendors, have files of their own; writing one: docs/connectors.md."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
import ssl
from urllib.parse import quote

from runonce.connectors.base import ActionCall, Capability, VendorResponse
from runonce.connectors.errors import PermanentVendorError
from runonce.connectors.config import VendorFields
from runonce.connectors.tls import client_context
from runonce.connectors.transport import http_json


def _digest(text: str, n: int = 24) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


class _NoStateCheck:
    """For connectors whose vendor cannot be asked whether an effect happened."""

    check_lag_s = 0.0

    def check(self, call: ActionCall) -> VendorResponse | None:
        return None


def _param(call: ActionCall, name: str) -> str:
    value = call.params.get(name)
    if value is None or value == "":
        raise PermanentVendorError(f"{call.tool}: params field {name!r} is required")
    return str(value)


@dataclass
class WebhookConnector(_NoStateCheck):
    """Generic HTTP POST with an ``Idempotency-Key`` header the receiver honours."""

    base_url: str
    hook: str = "generic"
    timeout_s: float = 30.0
    name: str = "webhook"
    tools: frozenset[str] = frozenset({"restart_service"})
    tls: ssl.SSLContext | None = None
    capability = Capability.VENDOR_KEY

    def perform(self, call: ActionCall) -> VendorResponse:
        res = http_json("POST", f"{self.base_url}/webhook/{self.hook}", {"tool": call.tool, "params": dict(call.params)},
                        headers={"Idempotency-Key": call.vendor_key}, timeout_s=self.timeout_s, tls=self.tls)
        return VendorResponse(str(res.body.get("id")))


@dataclass
class SlackConnector(_NoStateCheck):
    """An incoming-webhook post. Slack deduplicates nothing: Capability.NONE."""

    base_url: str
    timeout_s: float = 30.0
    name: str = "slack"
    tools: frozenset[str] = frozenset({"post_slack_message"})
    tls: ssl.SSLContext | None = None
    capability = Capability.NONE

    def perform(self, call: ActionCall) -> VendorResponse:
        channel = _param(call, "channel").lstrip("#")
        res = http_json("POST", f"{self.base_url}/slack/{quote(channel)}", {"text": call.params.get("text", "")},
                        timeout_s=self.timeout_s, tls=self.tls)
        return VendorResponse(str(res.body.get("id")))


@dataclass
class JiraConnector:
    """Creates an issue labelled with the vendor key, so a state check can find it.

    Jira's search is eventually consistent: an issue created a moment ago may not be found
    yet. ``check_lag_s`` is the bound assumed on that lag; "not found" is believed only from a
    search made that long after the last attempt could have created the issue (the runner
    looks again until then). Set it with RUNONCE_JIRA_SEARCH_LAG_MS to your instance's."""

    base_url: str
    timeout_s: float = 30.0
    check_lag_s: float = 10.0
    name: str = "jira"
    tools: frozenset[str] = frozenset({"create_jira_ticket"})
    tls: ssl.SSLContext | None = None
    capability = Capability.STATE_CHECK

    @staticmethod
    def label(call: ActionCall) -> str:
        return f"runonce-{_digest(call.vendor_key, 16)}"

    def perform(self, call: ActionCall) -> VendorResponse:
        fields = {"project": {"key": _param(call, "project")}, "summary": str(call.params.get("summary", "")),
                  "description": str(call.params.get("description", "")), "labels": [self.label(call)]}
        res = http_json("POST", f"{self.base_url}/jira/rest/api/2/issue", {"fields": fields}, timeout_s=self.timeout_s, tls=self.tls)
        return VendorResponse(str(res.body["key"]))

    def check(self, call: ActionCall) -> VendorResponse | None:
        res = http_json("GET", f"{self.base_url}/jira/rest/api/2/search?label={self.label(call)}",
                        timeout_s=self.timeout_s, tls=self.tls)
        issues = res.body.get("issues") or []
        return VendorResponse(str(issues[0]["key"]), "found by state check") if issues else None


@dataclass
class CalendarConnector(_NoStateCheck):
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


@dataclass
class SalesforceConnector:
    """Field update as read, compare, write: if the field already holds the value (a write whose
    response was lost), nothing is written again."""

    base_url: str
    timeout_s: float = 30.0
    check_lag_s = 0.0  # a record read by id is consistent
    name: str = "salesforce"
    tools: frozenset[str] = frozenset({"update_salesforce_field"})
    tls: ssl.SSLContext | None = None
    capability = Capability.STATE_CHECK

    def _url(self, call: ActionCall) -> str:
        obj = quote(str(call.params.get("object", "Opportunity")), safe="")
        return f"{self.base_url}/salesforce/sobjects/{obj}/{quote(_param(call, 'record_id'), safe='')}"

    def check(self, call: ActionCall) -> VendorResponse | None:
        current = http_json("GET", self._url(call), timeout_s=self.timeout_s, tls=self.tls).body or {}
        field = _param(call, "field")
        if field in current and current[field] == call.params.get("value"):
            return VendorResponse(f"{current.get('Id')}.{field}", "already set")
        return None

    def perform(self, call: ActionCall) -> VendorResponse:
        done = self.check(call)
        if done is not None:
            return done
        field = _param(call, "field")
        http_json("PATCH", self._url(call), {field: call.params.get("value")}, timeout_s=self.timeout_s, tls=self.tls)
        return VendorResponse(f"{call.params['record_id']}.{field}")


def webhook(fields: VendorFields) -> WebhookConnector:
    return WebhookConnector(fields.url("base_url"), fields.text("hook", "ops"), fields.timeout_s, fields.name,
                            fields.tools(WebhookConnector.tools), _tls(fields))


def slack(fields: VendorFields) -> SlackConnector:
    return SlackConnector(fields.url("base_url"), fields.timeout_s, fields.name, fields.tools(SlackConnector.tools),
                          _tls(fields))


def jira(fields: VendorFields) -> JiraConnector:
    return JiraConnector(fields.url("base_url"), fields.timeout_s, fields.number("search_lag_s", 10.0), fields.name,
                         fields.tools(JiraConnector.tools), _tls(fields))


def calendar(fields: VendorFields) -> CalendarConnector:
    return CalendarConnector(fields.url("base_url"), fields.timeout_s, fields.name,
                             fields.tools(CalendarConnector.tools), _tls(fields))


def salesforce(fields: VendorFields) -> SalesforceConnector:
    return SalesforceConnector(fields.url("base_url"), fields.timeout_s, fields.name,
                               fields.tools(SalesforceConnector.tools), _tls(fields))


def _tls(fields: VendorFields) -> ssl.SSLContext:
    return client_context(fields.ca_file)
