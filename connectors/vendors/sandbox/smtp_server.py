"""A local SMTP relay (aiosmtpd) that behaves like every relay on port 587: STARTTLS before
anything else, then AUTH, then mail (or TLS from the first byte, as on 465). It delivers into
the ledger, records every message it receives, and can answer slowly or hang up after
accepting a message, or close a session kept idle, as relays close idle clients."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import warnings
from email import message_from_bytes
from typing import Any, Mapping

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from runonce.connectors.vendors.sandbox.ledger import Effect, Ledger, Request

# aiosmtpd 1.4 sets its own deprecated Session.login_data on every successful AUTH
# (and warns that AUTH over implicit TLS is AUTH "without TLS": it knows only STARTTLS's)
warnings.filterwarnings("ignore", message="Session.login_data is deprecated")
warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
logging.getLogger("mail.log").setLevel(logging.ERROR)


class _Handler:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.delay_s = 0.0
        #: deliver, then close the connection instead of answering (this many messages)
        self.drop_after_data = 0
        #: close the connection at the next MAIL FROM of a session that already carried a
        #: message, instead of answering (this many sessions): a client's kept session that the
        #: relay closed while it was idle
        self.hang_up_kept = 0
        #: sessions that carried a message (their MAIL FROM counted)
        self._carried: set[int] = set()

    async def handle_MAIL(self, server: Any, session: Any, envelope: Any, address: str,  # noqa: N802
                          mail_options: list[str]) -> str:
        if id(session) in self._carried and self.hang_up_kept > 0:
            self.hang_up_kept -= 1
            self.ledger.received(Request("SMTP", "MAIL", "", "hung up: a kept session"))
            server.transport.abort()
            return "421 closing an idle session"
        self._carried.add(id(session))
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        msg = message_from_bytes(envelope.content)
        self.ledger.received(Request("SMTP", "DATA", str(msg.get("Message-ID", "")),
                                     ",".join(envelope.rcpt_tos)))
        # The relay accepts and delivers before it answers: a slow answer hides a success. One
        # message is one effect, however many recipients (Cc and Bcc) it reaches.
        self.ledger.record(Effect("smtp", str(msg.get("Message-ID", "")),
                                  f"delivered to {len(envelope.rcpt_tos)} recipient(s)",
                                  {"to": str(msg.get("To", "")), "recipients": list(envelope.rcpt_tos),
                                   "subject": str(msg.get("Subject", "")), "from": envelope.mail_from}))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.drop_after_data > 0:  # delivered; the client never hears so
            self.drop_after_data -= 1
            server.transport.abort()
        return "250 OK queued"


class _Authenticator:
    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = dict(users)

    def __call__(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login, password = auth_data.login.decode(), auth_data.password.decode()
        return AuthResult(success=self.users.get(login) == password and bool(password), handled=False)


class SmtpServer:
    """``tls`` None: plain SMTP and no AUTH (loopback only, for tests of that refusal). With a
    server context: STARTTLS required before AUTH and mail (``implicit``: TLS from the first
    byte), and AUTH required when ``users`` are given."""

    def __init__(self, ledger: Ledger | None = None, port: int = 0, host: str = "127.0.0.1", *,
                 tls: ssl.SSLContext | None = None, implicit: bool = False,
                 users: Mapping[str, str] | None = None) -> None:
        self.ledger = ledger or Ledger()
        self.handler = _Handler(self.ledger)
        if port == 0:
            with socket.socket() as s:
                s.bind((host if host != "0.0.0.0" else "127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        self.implicit = implicit
        auth: dict[str, Any] = {}
        if users:
            # implicit TLS is TLS from the first byte; aiosmtpd's "require TLS" knows only STARTTLS's
            auth = {"authenticator": _Authenticator(users), "auth_required": True, "auth_require_tls": not implicit}
        if tls is not None and implicit:
            self.controller = Controller(self.handler, hostname=host, port=port, ssl_context=tls, **auth)
        elif tls is not None:
            self.controller = Controller(self.handler, hostname=host, port=port, tls_context=tls,
                                         require_starttls=True, **auth)
        else:
            self.controller = Controller(self.handler, hostname=host, port=port, **auth)

    def set_delay(self, seconds: float) -> None:
        self.handler.delay_s = seconds

    def drop_after_data(self, messages: int = 1) -> None:
        """The next ``messages`` mails are delivered, then the connection closes unanswered."""
        self.handler.drop_after_data = messages

    def hang_up_kept(self, sessions: int = 1) -> None:
        """The next ``sessions`` sessions that send a second message find their connection
        closed at its MAIL FROM, as if the relay had closed them while they idled."""
        self.handler.hang_up_kept = sessions

    def start(self) -> SmtpServer:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()
