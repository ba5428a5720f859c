"""Email through an SMTP relay as relays are: STARTTLS on 587 or TLS from the first byte on
465, AUTH, and a sender of the deployment's own. SMTP deduplicates nothing, hence
Capability.NONE: after an unknown outcome the action is ``in_doubt``, never sent again. The
Message-ID is derived from the vendor key, so a mail client threads a copy with its original.
Sessions are kept between messages (``SmtpSessions``): one lost before a message's DATA sent
nothing of it, one that fails once DATA began is closed and leaves the message in doubt."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formataddr, parseaddr

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import PermanentVendorError
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.tls import client_context, is_loopback
from runonce.connectors.toolkit.transport import SmtpRelay, SmtpSessions, SmtpTls, smtp_session

TOOLS = frozenset({"send_email"})
DEFAULT_PORTS = {SmtpTls.STARTTLS: 587, SmtpTls.IMPLICIT: 465, SmtpTls.NONE: 25}


@dataclass
class SmtpConnector:
    name: str
    sessions: SmtpSessions
    #: the envelope sender (MAIL FROM), and the From header unless ``from_header`` names another
    sender: str
    from_header: str = ""
    tools: frozenset[str] = TOOLS
    capability = Capability.NONE

    @staticmethod
    def message_id(call: ActionCall, domain: str = "runonce.local") -> str:
        """From the vendor key alone, at the sender's domain: every attempt of one action is one Message-ID."""
        return f"<{hashlib.sha256(call.vendor_key.encode()).hexdigest()[:24]}@{domain}>"

    def perform(self, call: ActionCall) -> VendorResponse:
        to = call.params.get("to")
        if not to or not isinstance(to, str):
            raise PermanentVendorError(f"{call.tool}: params field 'to' is required")
        msg = EmailMessage()
        msg["From"] = self.from_header or self.sender
        msg["To"] = to
        cc, bcc = call.params.get("cc"), call.params.get("bcc")
        if cc:
            msg["Cc"] = cc if isinstance(cc, str) else ", ".join(map(str, cc))
        if bcc:  # smtplib sends to Bcc recipients and drops the header from the message
            msg["Bcc"] = bcc if isinstance(bcc, str) else ", ".join(map(str, bcc))
        msg["Subject"] = str(call.params.get("subject", ""))
        msg["Message-ID"] = self.message_id(call, self.sender.rpartition("@")[2] or "runonce.local")
        msg.set_content(str(call.params.get("body", "")))
        self.sessions.send(msg, self.sender)
        return VendorResponse(msg["Message-ID"])

    @property
    def relay(self) -> SmtpRelay:
        return self.sessions.relay

    def probe(self) -> str:
        """EHLO, then STARTTLS (or TLS from the start) and AUTH, as a send would; no mail."""
        smtp_session(self.relay).quit()
        auth = f"AUTH as {self.relay.username}" if self.relay.username is not None else "no AUTH"
        return f"{self.relay}: EHLO, {self.relay.tls.value} TLS, {auth}: ready"


FIELDS = Spec("smtp", (
    Field("host", FieldType.TEXT, "the relay"),
    Field("tls", FieldType.CHOICE, "`starttls` (then refused if not offered), `implicit` (TLS from the first byte), "
                                   "`none` (loopback only)", SmtpTls.STARTTLS.value,
          options=tuple(t.value for t in SmtpTls)),
    Field("port", FieldType.INTEGER, "the relay's port; else 587 for starttls, 465 for implicit, 25 for none",
          optional=True),
    Field("username", FieldType.SECRET, "AUTH's user name (with `password`)", optional=True, plain_ok=True),
    Field("password", FieldType.SECRET, "AUTH's password (with `username`)", optional=True),
    Field("sender", FieldType.TEXT, "the envelope sender (MAIL FROM), and the From header unless `from` is given"),
    Field("from", FieldType.TEXT, "the From header, if not the sender", optional=True),
    Field("messages_per_session", FieldType.INTEGER, "messages sent on one authenticated session before it is "
                                                     "closed (relays cap them); 1: a session per message", 20),
))


def from_config(fields: VendorFields) -> SmtpConnector:
    host = fields.text("host")
    tls = SmtpTls(fields.choice("tls"))
    if tls is SmtpTls.NONE and not is_loopback(host):
        raise fields.error("tls", f'"none" sends mail and credentials in clear; refused except to loopback '
                                  f'(host is {host!r})')
    port = fields.integer("port", DEFAULT_PORTS[tls])
    username, password = fields.optional_secret("username"), fields.optional_secret("password")
    if (username is None) != (password is None):
        raise fields.missing("password" if password is None else "username", "username and password go together")
    sender = fields.text("sender")
    if "@" not in parseaddr(sender)[1]:
        raise fields.error("sender", f"must be an address, got {sender!r}")
    from_header = fields.text("from")
    relay = SmtpRelay(host, port, tls, client_context(fields.ca_file) if tls is not SmtpTls.NONE else None,
                      username, password, fields.timeout_s)
    sessions = SmtpSessions(relay, messages_per_session=fields.integer("messages_per_session"))
    return SmtpConnector(fields.name, sessions, parseaddr(sender)[1], from_header or formataddr(parseaddr(sender)),
                         fields.tools(TOOLS))


KIND = Kind(FIELDS, from_config)
