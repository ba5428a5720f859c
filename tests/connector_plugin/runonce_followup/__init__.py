"""The seed's ``send_followup_email`` through an HTTP email API that deduplicates on an
``Idempotency-Key`` (Resend's ``POST /emails``): a runonce connector, written as docs/connectors.md
describes, and found by its entry point (``[project.entry-points."runonce.connectors"]``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from runonce.connectors import toolkit

TOOLS = frozenset({"send_followup_email"})
FIELDS = toolkit.Spec("followup-email", (
    toolkit.Field("api_key", toolkit.FieldType.SECRET, "the API key, sent as the Bearer token"),
    toolkit.Field("sender", toolkit.FieldType.TEXT, "the From address"),
    toolkit.Field("base_url", toolkit.FieldType.URL, "the email API", "https://api.resend.com"),
))


@dataclass
class FollowupEmail:
    name: str
    http: toolkit.VendorHttp
    api_key: toolkit.Secret
    sender: str
    tools: frozenset[str] = TOOLS
    #: the API replays the first answer to a repeated Idempotency-Key: calling again is safe
    capability = toolkit.Capability.VENDOR_KEY

    def headers(self, call: toolkit.ActionCall) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key.reveal()}", "Content-Type": "application/json",
                "Idempotency-Key": call.vendor_key}

    def perform(self, call: toolkit.ActionCall) -> toolkit.VendorResponse:
        params = call.params
        if not params.get("recipient"):
            raise toolkit.PermanentVendorError(f"{call.tool}: params field 'recipient' is required")
        message = {"from": self.sender, "to": [str(params["recipient"])], "subject": str(params.get("subject", "")),
                   "text": str(params.get("body", ""))}
        if params.get("campaign_id"):
            message["tags"] = [{"name": "campaign", "value": str(params["campaign_id"])}]
        result = self.http.request("POST", "/emails", json.dumps(message).encode(), headers=self.headers(call))
        _raise_for_email_api("POST", self.http.url("/emails"), result)
        return toolkit.VendorResponse(str(result.body["id"]))


def _raise_for_email_api(method: str, url: str, result: toolkit.HttpResult) -> None:
    """The API's own errors first: its key reused with another message is a 409 that will never
    pass (the generic table would retry a 409)."""
    name = result.body.get("name") if isinstance(result.body, dict) else None
    if result.status == 409 and name == "invalid_idempotent_request":
        raise toolkit.PermanentVendorError(f"{method} {url}: the idempotency key was used with another message")
    toolkit.raise_for_status(method, url, result)


def from_config(fields: toolkit.VendorFields) -> FollowupEmail:
    http = fields.http(fields.url("base_url"))
    return FollowupEmail(fields.name, http, fields.secret("api_key"), fields.text("sender"), fields.tools(TOOLS))


#: the entry point: its fields, declared, and the factory
KIND = toolkit.Kind(FIELDS, from_config)
