"""Jira Cloud, as Atlassian defines it: REST API v3, Basic auth with an account's email and
an API token (kind ``jira``).

An action creates one issue (``POST /rest/api/3/issue``), labelled with a label derived from
its vendor key, so a state check can find it: ``GET /rest/api/3/search/jql`` with
``labels = "…"``. Jira deduplicates nothing, so the capability is ``STATE_CHECK``: after an
unknown outcome the runner searches before it creates again.

Jira's search index lags behind its writes: an issue created a moment ago may not be found
yet. ``check_lag_s`` (the connectors file's ``search_lag_s``) is the bound assumed on that lag;
"not found" is believed only from a search made that long after the last attempt could have
created the issue (the runner looks again until then).

The description is in Atlassian Document Format, as v3 requires (a plain string is refused).

Jira's answers, read before the generic HTTP table:

    201                             created; ``vendor_ref`` is the issue key
    400 (errorMessages / errors)    failed, not created (a missing project, summary, issue type)
    401, 403                        failed: Jira refused the credentials (never shown)
    429                             the vendor's rate limit (Retry-After)
    5xx, timeout, lost connection   unknown: the runner searches, then creates only if absent
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlencode

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import OutcomeUnknown, PermanentVendorError
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import HttpResult, VendorHttp, raise_for_status

TOOLS = frozenset({"create_jira_ticket"})


def adf(text: str) -> dict[str, Any]:
    """``text`` as an Atlassian Document: one paragraph per line (an empty line, none)."""
    paragraphs = [{"type": "paragraph", "content": [{"type": "text", "text": line}]}
                  for line in text.splitlines() if line]
    return {"type": "doc", "version": 1, "content": paragraphs}


def label(call: ActionCall) -> str:
    """The label that carries the action: derived from its vendor key, the same on every retry."""
    return f"runonce-{hashlib.sha256(call.vendor_key.encode()).hexdigest()[:16]}"


@dataclass
class JiraCloudConnector:
    name: str
    http: VendorHttp
    email: str
    api_token: Secret
    issue_type: str = "Task"
    check_lag_s: float = 10.0
    tools: frozenset[str] = TOOLS
    capability = Capability.STATE_CHECK

    @property
    def timeout_s(self) -> float:
        return self.http.timeout_s

    def _headers(self) -> dict[str, str]:
        basic = base64.b64encode(f"{self.email}:{self.api_token.reveal()}".encode()).decode()
        return {"Authorization": f"Basic {basic}", "Accept": "application/json"}

    def perform(self, call: ActionCall) -> VendorResponse:
        project = str(call.params.get("project") or "").strip()
        if not project:
            raise PermanentVendorError(f"{call.tool}: params field 'project' is required")
        description = str(call.params.get("description") or "")
        first_line = description.splitlines()[0] if description else ""
        summary = str(call.params.get("summary") or first_line or f"{call.tool} {call.action_id}")[:255]
        fields = {"project": {"key": project}, "issuetype": {"name": str(call.params.get("issue_type")
                                                                          or self.issue_type)},
                  "summary": summary, "description": adf(description),
                  "labels": [label(call)]}
        url = self.http.url("/rest/api/3/issue")
        result = self.http.request("POST", "/rest/api/3/issue", json.dumps({"fields": fields}).encode(),
                                   headers={**self._headers(), "Content-Type": "application/json"})
        body = _raise_for_jira("POST", url, result)
        if not body.get("key"):
            # a 2xx that names no issue: one may well exist; the state check (its label) decides
            raise OutcomeUnknown(f"POST {url}: HTTP {result.status} named no issue key; created or not, "
                                 f"the state check decides")
        return VendorResponse(str(body["key"]), "created")

    def check(self, call: ActionCall) -> VendorResponse | None:
        query = urlencode({"jql": f'labels = "{label(call)}"', "fields": "key", "maxResults": 1})
        url = self.http.url("/rest/api/3/search/jql")
        body = _raise_for_jira("GET", url, self.http.request("GET", f"/rest/api/3/search/jql?{query}",
                                                             headers=self._headers()))
        issues = body.get("issues") or []
        if issues and not issues[0].get("key"):
            raise OutcomeUnknown(f"GET {url}: found an issue with no key")
        return VendorResponse(str(issues[0]["key"]), "found by state check") if issues else None

    def probe(self) -> str:
        """Jira's harmless authenticated call: ``GET /rest/api/3/myself``."""
        body = _raise_for_jira("GET", self.http.url("/rest/api/3/myself"),
                               self.http.request("GET", "/rest/api/3/myself", headers=self._headers()))
        return f"GET /rest/api/3/myself: {body.get('emailAddress', self.email)} (token {self.api_token.source})"


def _raise_for_jira(method: str, url: str, result: HttpResult) -> Mapping[str, Any]:
    body: Mapping[str, Any] = result.body if isinstance(result.body, dict) else {}
    if result.status < 400:
        return body
    said = (f"{method} {url}: HTTP {result.status} "
            f"{'; '.join(map(str, body.get('errorMessages') or []))} {body.get('errors') or ''}").rstrip()
    if result.status in (401, 403):
        raise PermanentVendorError(f"{said} (Jira refused the credentials)")
    raise_for_status(method, url, result)
    return body


FIELDS = Spec("jira", (
    Field("base_url", FieldType.URL, "your site, `https://your-site.atlassian.net`"),
    Field("email", FieldType.TEXT, "the account the API token belongs to"),
    Field("api_token", FieldType.SECRET, "its API token (Basic auth with `email`)"),
    Field("issue_type", FieldType.TEXT, "the issue type when an action names none", "Task"),
    Field("search_lag_s", FieldType.NUMBER, "how far Jira's search index may lag behind a create: \"absent\" "
                                            "is believed only from a search made this long after an attempt", 10.0),
))


def from_config(fields: VendorFields) -> JiraCloudConnector:
    http = fields.http(fields.url("base_url"))
    return JiraCloudConnector(fields.name, http, fields.text("email"), fields.secret("api_token"),
                              fields.text("issue_type"), fields.number("search_lag_s"), fields.tools(TOOLS))


KIND = Kind(FIELDS, from_config)
