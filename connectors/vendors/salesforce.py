"""Salesforce, as its REST API defines it (kind ``salesforce``): an OAuth access token as the
Bearer token, against your org's instance URL.

An action sets one field of one record: ``PATCH /services/data/v62.0/sobjects/{SObject}/{Id}``
(204). The capability is ``STATE_CHECK``: the record is read first with
``GET …/{Id}?fields={field}``, and a field that already holds the value (a write whose answer
was lost) is not written again. A record read by id is consistent, so no lag is assumed.

Salesforce answers errors as a list of ``{"message", "errorCode"}``, read before the generic
HTTP table:

    INVALID_SESSION_ID (401)        failed: Salesforce refused the token (never shown)
    REQUEST_LIMIT_EXCEEDED (403)    the org's API limit: the vendor's rate limit
    NOT_FOUND (404), INVALID_FIELD, failed, not written
    other 4xx
    SERVER_UNAVAILABLE (503)        not written; retried
    other 5xx, timeout, lost        unknown: the runner reads the field before it writes again
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote, urlencode

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import PermanentVendorError, RateLimited
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import HttpResult, VendorHttp, raise_for_status

TOOLS = frozenset({"update_salesforce_field"})
API_VERSION = "v62.0"
#: an API name: letters, digits and underscores (custom fields end in __c)
_API_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def _name(call: ActionCall, field: str, default: str | None = None) -> str:
    value = str(call.params.get(field) or default or "")
    if not _API_NAME.match(value):
        raise PermanentVendorError(f"{call.tool}: params field {field!r} must be an API name, got {value!r}")
    return value


@dataclass
class SalesforceConnector:
    name: str
    http: VendorHttp
    token: Secret
    api_version: str = API_VERSION
    tools: frozenset[str] = TOOLS
    capability = Capability.STATE_CHECK
    check_lag_s = 0.0  # a record read by id is consistent

    @property
    def timeout_s(self) -> float:
        return self.http.timeout_s

    def _url(self, call: ActionCall) -> str:
        record_id = str(call.params.get("record_id") or "")
        if not record_id:
            raise PermanentVendorError(f"{call.tool}: params field 'record_id' is required")
        sobject = _name(call, "object", "Opportunity")
        return f"/services/data/{self.api_version}/sobjects/{sobject}/{quote(record_id, safe='')}"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token.reveal()}", "Accept": "application/json"}

    def check(self, call: ActionCall) -> VendorResponse | None:
        field = _name(call, "field")
        path = self._url(call)
        record = _raise_for_salesforce("GET", self.http.url(path), self.http.request(
            "GET", f"{path}?{urlencode({'fields': field})}", headers=self._headers()))
        if field in record and record[field] == call.params.get("value"):
            return VendorResponse(f"{record.get('Id', call.params['record_id'])}.{field}", "already set")
        return None

    def perform(self, call: ActionCall) -> VendorResponse:
        done = self.check(call)
        if done is not None:
            return done
        field, path = _name(call, "field"), self._url(call)
        _raise_for_salesforce("PATCH", self.http.url(path), self.http.request(
            "PATCH", path, json.dumps({field: call.params.get("value")}).encode(),
            headers={**self._headers(), "Content-Type": "application/json"}))
        return VendorResponse(f"{call.params['record_id']}.{field}", "written")

    def probe(self) -> str:
        """Salesforce's harmless authenticated call: the org's API limits."""
        path = f"/services/data/{self.api_version}/limits"
        _raise_for_salesforce("GET", self.http.url(path), self.http.request("GET", path, headers=self._headers()))
        return f"GET /services/data/{self.api_version}/limits answered (token {self.token.source})"


def _raise_for_salesforce(method: str, url: str, result: HttpResult) -> Mapping[str, Any]:
    if result.status < 400:
        return result.body if isinstance(result.body, dict) else {}
    errors = result.body if isinstance(result.body, list) else []
    codes = {str(e.get("errorCode", "")) for e in errors if isinstance(e, dict)}
    said = f"{method} {url}: HTTP {result.status} " + "; ".join(
        f"{e.get('errorCode')}: {e.get('message')}" for e in errors if isinstance(e, dict))
    if result.status == 401 or "INVALID_SESSION_ID" in codes:
        raise PermanentVendorError(f"{said} (Salesforce refused the token)")
    if "REQUEST_LIMIT_EXCEEDED" in codes:
        raise RateLimited(said, None)
    raise_for_status(method, url, result)
    return {}


FIELDS = Spec("salesforce", (
    Field("instance_url", FieldType.URL, "your org, `https://yourorg.my.salesforce.com`"),
    Field("token", FieldType.SECRET, "an OAuth access token, sent as the Bearer token"),
    Field("api_version", FieldType.TEXT, "the REST API's version", API_VERSION),
))


def from_config(fields: VendorFields) -> SalesforceConnector:
    http = fields.http(fields.url("instance_url"))
    return SalesforceConnector(fields.name, http, fields.secret("token"), fields.text("api_version"),
                               fields.tools(TOOLS))


KIND = Kind(FIELDS, from_config)
