"""Slack, as Slack defines it: the Web API's ``chat.postMessage`` with a bot token (kind
``slack``), or an incoming webhook (kind ``slack-webhook``).

Slack deduplicates nothing: a message posted twice is two messages. Both kinds are
``Capability.NONE``: after an answer that does not say whether the message went out, the action
is ``in_doubt`` and is never posted again.

Why not Slack's ``slack_sdk``: runonce's safety rule needs to know whether a request left the
machine (refused connection: not posted; lost after sending: unknown). ``WebClient`` raises
the same ``URLError`` for both, and its retry handlers may post again on their own. The request
is one JSON POST; connectors/toolkit/transport.py is the one I/O seam of every HTTP connector.

The Web API answers HTTP 200 with ``"ok": false`` and an error code for most failures
(Slack's published API description: ``slackapi/slack-api-specs``, ``web-api/``), read here
before the generic HTTP table:

    ratelimited / HTTP 429          the vendor's rate limit (Retry-After), nothing posted
    service_unavailable,            not posted; retried
    request_timeout
    internal_error, fatal_error     unknown: Slack says "it's possible some aspect of the
                                    operation succeeded before the error was raised"
    not_authed, invalid_auth,       failed, never retried: the token is refused (probe it:
    token_revoked, ...              ``runonce connectors check --probe``)
    any other error                 failed, never retried (channel_not_found, not_in_channel,
                                    is_archived, msg_too_long, no_text, ...)
    5xx, timeout, lost connection   unknown (connectors/toolkit/transport.py)
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import OutcomeUnknown, PermanentVendorError, RateLimited, TransientVendorError
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.tls import is_loopback
from runonce.connectors.toolkit.transport import HttpResult, VendorHttp, raise_for_status, retry_after_seconds

TOOLS = frozenset({"post_slack_message"})
#: ok:false errors that say nothing was posted and a later call may succeed
NOT_POSTED_RETRY = frozenset({"service_unavailable", "request_timeout"})
#: ok:false errors after which the message may have been posted
MAY_HAVE_POSTED = frozenset({"internal_error", "fatal_error"})
#: ok:false errors that refuse the token itself
TOKEN_REFUSED = frozenset({"not_authed", "invalid_auth", "account_inactive", "token_revoked", "token_expired",
                           "no_permission", "missing_scope", "org_login_required", "ekm_access_denied"})
RATE_LIMITED = frozenset({"ratelimited", "rate_limited"})


def message(call: ActionCall) -> dict[str, Any]:
    """The action's params as a ``chat.postMessage`` body: ``channel`` (an id, or a name such
    as ``#incidents``), ``text``, and optionally ``thread_ts`` (a reply) and ``blocks``."""
    params = call.params
    channel = str(params.get("channel") or "").strip()
    if not channel:
        raise PermanentVendorError(f"{call.tool}: params field 'channel' is required")
    text, blocks = params.get("text"), params.get("blocks")
    if not text and not blocks:
        raise PermanentVendorError(f"{call.tool}: params need text (or blocks)")
    body: dict[str, Any] = {"channel": channel}
    if text:
        body["text"] = str(text)
    if blocks:
        if not isinstance(blocks, list):
            raise PermanentVendorError(f"{call.tool}: blocks must be a list of Block Kit blocks")
        body["blocks"] = blocks
    if params.get("thread_ts"):
        body["thread_ts"] = str(params["thread_ts"])
    return body


@dataclass
class SlackConnector:
    """``POST {base_url}/api/chat.postMessage`` with ``Authorization: Bearer xoxb-…``."""

    name: str
    token: Secret
    http: VendorHttp
    tools: frozenset[str] = TOOLS
    capability = Capability.NONE

    def _call(self, method: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        result = self.http.request("POST", f"/api/{method}", json.dumps(body).encode(),
                                   headers={"Authorization": f"Bearer {self.token.reveal()}",
                                            "Content-Type": "application/json; charset=utf-8"})
        return _raise_for_slack(self.http.url(f"/api/{method}"), result)

    def perform(self, call: ActionCall) -> VendorResponse:
        answer = self._call("chat.postMessage", message(call))
        return VendorResponse(f"{answer.get('channel', '')}/{answer.get('ts', '')}", "posted")

    def probe(self) -> str:
        """Slack's harmless authenticated call: ``auth.test`` names the workspace and the bot."""
        answer = self._call("auth.test", {})
        return f"auth.test: ok as {answer.get('user', '?')} in {answer.get('team', '?')} (token {self.token.source})"


def _raise_for_slack(url: str, result: HttpResult) -> Mapping[str, Any]:
    body: Mapping[str, Any] = result.body if isinstance(result.body, dict) else {}
    error = str(body.get("error", ""))
    said = f"POST {url}: HTTP {result.status} {error or result.body!r}"
    if result.status == 429 or error in RATE_LIMITED:
        raise RateLimited(said, retry_after_seconds(result.headers.get("retry-after")))
    if result.status != 200:
        raise_for_status("POST", url, result)
        raise OutcomeUnknown(f"{said}: an answer Slack does not give")  # a 1xx/2xx/3xx other than 200
    if body.get("ok") is True:
        return body
    if error in NOT_POSTED_RETRY:
        raise TransientVendorError(said)
    if error in MAY_HAVE_POSTED:
        raise OutcomeUnknown(f"{said} (Slack: the message may have been posted)")
    if error in TOKEN_REFUSED:
        raise PermanentVendorError(f"{said} (Slack refused the token)")
    if not error:
        raise OutcomeUnknown(f"{said}: neither ok nor an error")
    raise PermanentVendorError(said)


@dataclass
class SlackWebhookConnector:
    """An incoming webhook (``https://hooks.slack.com/services/…``): its URL is the credential
    and names the channel, so a ``channel`` in the params is ignored. Slack answers ``ok``
    (text) or an HTTP error with a code: 400 ``invalid_payload``/``no_text``, 403
    ``action_prohibited``, 404 ``channel_not_found``, 410 ``channel_is_archived``, all failed;
    429 its rate limit; 5xx unknown."""

    name: str
    #: the incoming webhook's URL, which is the credential: shown as its source, never itself
    http: VendorHttp
    tools: frozenset[str] = TOOLS
    capability = Capability.NONE

    @classmethod
    def at(cls, name: str, url: Secret, *, tools: frozenset[str] = TOOLS, timeout_s: float = 30.0,
           tls: ssl.SSLContext | None = None) -> SlackWebhookConnector:
        """The connector for the webhook at ``url``, named in every message and span by its source."""
        shown = f"the incoming webhook of {name} ({url.source})"
        return cls(name, VendorHttp(url.reveal(), timeout_s=timeout_s, tls=tls, shown_as=shown), tools)

    def perform(self, call: ActionCall) -> VendorResponse:
        body = {k: v for k, v in message(call).items() if k != "channel"}
        shown = self.http.url()
        result = self.http.request("POST", "", json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        if result.status == 429:
            raise RateLimited(f"POST {shown}: HTTP 429", retry_after_seconds(result.headers.get("retry-after")))
        if result.status == 503:
            raise TransientVendorError(f"POST {shown}: HTTP 503 {result.body!r}")
        if result.status >= 500:
            raise OutcomeUnknown(f"POST {shown}: HTTP {result.status} {result.body!r}")
        if result.status >= 400:
            raise PermanentVendorError(f"POST {shown}: HTTP {result.status} {result.body!r}")
        return VendorResponse("posted", "posted")


FIELDS = Spec("slack", (
    Field("token", FieldType.SECRET, "the app's bot token (`xoxb-...`), with `chat:write`"),
    Field("base_url", FieldType.URL, "Slack's Web API", "https://slack.com"),
))
WEBHOOK_FIELDS = Spec("slack-webhook", (
    Field("url", FieldType.SECRET, "the incoming webhook's URL (`https://hooks.slack.com/services/...`): "
                                   "the credential, and the channel"),
))


def from_config(fields: VendorFields) -> SlackConnector:
    token = fields.secret("token")
    return SlackConnector(fields.name, token, fields.http(fields.url("base_url")), fields.tools(TOOLS))


def webhook_from_config(fields: VendorFields) -> SlackWebhookConnector:
    url = fields.secret("url")
    parts = urlsplit(url.reveal())
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.hostname or "")):
        raise fields.error("url", "must be an https:// URL (an incoming webhook's: hooks.slack.com/services/...); "
                                  "plain http only to loopback")
    return SlackWebhookConnector.at(fields.name, url, tools=fields.tools(TOOLS), timeout_s=fields.timeout_s,
                                    tls=fields.tls(url.reveal()))


KIND = Kind(FIELDS, from_config)
WEBHOOK_KIND = Kind(WEBHOOK_FIELDS, webhook_from_config)
