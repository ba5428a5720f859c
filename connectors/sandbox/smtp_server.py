"""A local SMTP server (aiosmtpd) that delivers into the ledger, records every message it
receives, and can answer slowly or hang up after accepting a message."""

from __future__ import annotations

import asyncio
import socket
from email import message_from_bytes
from typing import Any

from aiosmtpd.controller import Controller

from runonce.connectors.sandbox.ledger import Effect, Ledger, Request


class _Handler:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.delay_s = 0.0
        #: deliver, then close the connection instead of answering (this many messages)
        self.drop_after_data = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        msg = message_from_bytes(envelope.content)
        self.ledger.received(Request("SMTP", "DATA", str(msg.get("Message-ID", "")),
                                     ",".join(envelope.rcpt_tos)))
        # The relay accepts and delivers before it answers: a slow answer hides a success.
        for rcpt in envelope.rcpt_tos:
            self.ledger.record(Effect("smtp", str(msg.get("Message-ID", "")), f"delivered to {rcpt}",
                                      {"to": rcpt, "subject": str(msg.get("Subject", ""))}))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.drop_after_data > 0:  # delivered; the client never hears so
            self.drop_after_data -= 1
            server.transport.abort()
        return "250 OK queued"


class SmtpServer:
    def __init__(self, ledger: Ledger | None = None, port: int = 0, host: str = "127.0.0.1") -> None:
        self.ledger = ledger or Ledger()
        self.handler = _Handler(self.ledger)
        if port == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        self.controller = Controller(self.handler, hostname=host, port=port)

    def set_delay(self, seconds: float) -> None:
        self.handler.delay_s = seconds

    def drop_after_data(self, messages: int = 1) -> None:
        """The next ``messages`` mails are delivered, then the connection closes unanswered."""
        self.handler.drop_after_data = messages

    def start(self) -> SmtpServer:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()
