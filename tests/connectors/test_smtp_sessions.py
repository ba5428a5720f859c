"""Kept SMTP sessions (``SmtpSessions``, connectors/toolkit/transport.py) against the sandbox
relay (STARTTLS, AUTH): messages share an authenticated session; a kept session the relay
closed fails before the message's DATA, and the message goes once on a new session; a session
that fails with a message on its way leaves that message in doubt, sent once, and is never
used again."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from runonce.connectors.executor.runner import ActionRunner
from runonce.connectors.toolkit.base import ActionCall, Connector
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.smtp_server import SmtpServer
from runonce.connectors.vendors.smtp import SmtpConnector
from runonce.wire.results import Status
from tests.connectors.test_ambiguous_answers import FAST


def _email(connectors: dict[str, Connector]) -> SmtpConnector:
    connector = connectors["smtp"]
    assert isinstance(connector, SmtpConnector)
    return connector


def _call(i: int) -> ActionCall:
    key = f"k-{uuid.uuid4().hex}"
    return ActionCall(f"a{i}", "send_email", {"to": f"lead{i}@prospect.example", "subject": f"s{i}"}, key)


def _send(connector: SmtpConnector, call: ActionCall) -> Status:
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(call)
    assert outcome is not None
    return outcome.status


def test_messages_share_one_authenticated_session_up_to_its_cap(smtp: SmtpServer, vendors: VendorServer,
                                                              connectors: dict[str, Connector]) -> None:
    """Catches a session closed after each message (a connect, TLS and AUTH each time), and
    a session kept past its cap."""
    email = _email(connectors)
    calls = [_call(i) for i in range(5)]
    assert [_send(email, c) for c in calls] == [Status.SUCCEEDED] * 5
    assert email.sessions.opened == 1
    assert all(vendors.ledger.count("smtp", email.message_id(c)) == 1 for c in calls)
    email.sessions.messages_per_session = 2
    assert [_send(email, _call(i)) for i in range(4)] == [Status.SUCCEEDED] * 4
    assert email.sessions.opened == 3  # the first session's third message, then two of two


def test_a_kept_session_the_relay_closed_takes_no_message(smtp: SmtpServer, vendors: VendorServer,
                                                          connectors: dict[str, Connector]) -> None:
    """The relay closed the kept session while it idled: the next message's MAIL FROM meets the
    closed connection, before any of the message left; it goes once, on a new session,
    succeeded. Catches a connection lost before DATA taken as "may have been sent" (the
    message in doubt, never sent)."""
    email = _email(connectors)
    first, second = _call(1), _call(2)
    assert _send(email, first) is Status.SUCCEEDED
    smtp.hang_up_kept(1)
    assert _send(email, second) is Status.SUCCEEDED
    assert vendors.ledger.count("smtp", email.message_id(second)) == 1 and email.sessions.opened == 2
    assert len(vendors.ledger.requests("MAIL")) == 1  # the fault did apply


def test_a_message_lost_on_a_kept_session_is_in_doubt_once_and_the_session_goes(
        smtp: SmtpServer, vendors: VendorServer, connectors: dict[str, Connector]) -> None:
    """The relay takes the second message on a kept session and hangs up before answering: that
    message is in doubt, delivered once (DATA once); the next goes on a new session. Catches a
    message tried again on another session after it was on its way (the recipient mailed
    twice), and a failed session kept."""
    email = _email(connectors)
    first, lost, after = _call(1), _call(2), _call(3)
    assert _send(email, first) is Status.SUCCEEDED
    smtp.drop_after_data(1)
    assert _send(email, lost) is Status.IN_DOUBT
    message_id = email.message_id(lost)
    assert vendors.ledger.count("smtp", message_id) == 1 and len(vendors.ledger.requests("DATA", message_id)) == 1
    assert _send(email, after) is Status.SUCCEEDED and email.sessions.opened == 2


def test_calls_in_flight_each_get_a_session_of_their_own_and_every_message_goes_once(
        smtp: SmtpServer, vendors: VendorServer, connectors: dict[str, Connector]) -> None:
    """Eight calls at once, 40 messages: each delivered once, on at most eight sessions (a
    session is never shared by two calls at once: smtplib's is not thread-safe)."""
    email = _email(connectors)
    calls = [_call(i) for i in range(40)]
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda c: _send(email, c), calls))
    assert statuses == [Status.SUCCEEDED] * 40
    assert all(vendors.ledger.count("smtp", email.message_id(c)) == 1 for c in calls)
    assert 1 <= email.sessions.opened <= 8
