"""Signed webhooks to a receiver of your own, as Standard Webhooks 1.0 defines them (kind
``webhook``): ``POST`` of a JSON event to the receiver's URL with three headers,

    webhook-id          the action's vendor key: the same on every retry of one action, so the
                        receiver deduplicates on it (the specification asks receivers to)
    webhook-timestamp   seconds since the epoch, of this attempt
    webhook-signature   ``v1,`` + base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}``, keyed with
                        the base64-decoded part of a ``whsec_…`` secret

so the receiver can tell runonce's call from anyone's, refuse a replay outside its tolerance,
and perform each id once. The capability is ``VENDOR_KEY``: calling again after an unknown
outcome sends the same id. The body is the specification's event shape:
``{"type": TOOL, "timestamp": ISO-8601, "data": PARAMS}``.

A receiver's answers follow the generic HTTP table (connectors/toolkit/transport.py): 2xx performed;
401 and 403 (the signature or secret refused) and other 4xx failed, never retried; 429 its rate
limit; 409 and 503 not performed, retried; other 5xx, a timeout or a lost connection unknown.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import VendorHttp, raise_for_status

SECRET_PREFIX = "whsec_"


def signing_key(secret: str) -> bytes:
    """The key a ``whsec_`` secret stands for: the base64 after the prefix."""
    encoded = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("a webhook secret is whsec_ followed by base64") from exc
    if not key:
        raise ValueError("a webhook secret may not be empty")
    return key


def sign(key: bytes, webhook_id: str, timestamp_s: int, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,`` + base64 HMAC-SHA256 of ``id.timestamp.body``."""
    digest = hmac.new(key, f"{webhook_id}.{timestamp_s}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


@dataclass
class StandardWebhookConnector:
    name: str
    http: VendorHttp
    secret: Secret
    tools: frozenset[str]
    #: seconds since the epoch; injectable so a test can sign at a fixed time
    clock: Callable[[], float] = time.time
    capability = Capability.VENDOR_KEY

    def perform(self, call: ActionCall) -> VendorResponse:
        now = self.clock()
        body = json.dumps({"type": call.tool,
                           "timestamp": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds"),
                           "data": dict(call.params)}, separators=(",", ":"), sort_keys=True).encode()
        headers = {"Content-Type": "application/json", "webhook-id": call.vendor_key,
                   "webhook-timestamp": str(int(now)),
                   "webhook-signature": sign(signing_key(self.secret.reveal()), call.vendor_key, int(now), body)}
        result = raise_for_status("POST", self.http.url(), self.http.request("POST", "", body, headers=headers))
        answer = result.body if isinstance(result.body, dict) else {}
        return VendorResponse(str(answer.get("id") or call.vendor_key), f"HTTP {result.status}")


FIELDS = Spec("webhook", (
    Field("url", FieldType.URL, "your receiver"),
    Field("secret", FieldType.SECRET, "the signing secret shared with the receiver, `whsec_` + base64"),
))


def from_config(fields: VendorFields) -> StandardWebhookConnector:
    url = fields.url("url")
    secret = fields.secret("secret")
    try:
        signing_key(secret.reveal())
    except ValueError as exc:
        raise fields.error("secret", str(exc)) from None  # never the value
    tools = fields.tools(frozenset())
    if not tools:
        raise fields.error("tools", "name the tools this receiver performs, e.g. tools = [\"restart_service\"]")
    return StandardWebhookConnector(fields.name, fields.http(url), secret, tools)


KIND = Kind(FIELDS, from_config)
