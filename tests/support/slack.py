"""The sandbox's Slack, as the connector tests reach it: its Web API with its bot token."""

from __future__ import annotations

from typing import Any

from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import HttpResult, VendorHttp
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.slack import SlackConnector

#: the path of Slack's chat.postMessage (the sandbox records requests under it)
POST = "/api/chat.postMessage"


def slack_connector(vendors: VendorServer, cls: type[SlackConnector] = SlackConnector, timeout_s: float = 30.0,
                    **fields: Any) -> SlackConnector:
    """``cls`` (SlackConnector or a test's subclass of it) with the sandbox's bot token."""
    return cls("slack", Secret("test", vendors.state.slack_token), VendorHttp(vendors.url, timeout_s=timeout_s),
               **fields)


def post(vendors: VendorServer, channel: str, text: str) -> HttpResult:
    """One post through the generic HTTP seam (``VendorHttp.json``), with the bot token."""
    return VendorHttp(vendors.url).json("POST", POST, {"channel": channel, "text": text},
                                        headers={"Authorization": f"Bearer {vendors.state.slack_token}"})
