"""The ``google-calendar`` kind against the sandbox's Google Calendar API v3 and its OAuth token
endpoint: a service account's key (google-auth signs the JWT) or a static token, an event id
of our choosing that the calendar refuses to hold twice (409 ``duplicate``), Google's errors.
Every recorded request is checked against the facts of Google's discovery document."""

from __future__ import annotations

import json
import re
import uuid
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runonce.connectors.executor import registry
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.toolkit.bearer import StaticBearer
from runonce.connectors.toolkit.errors import PermanentVendorError
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import VendorHttp
from runonce.connectors.vendors.google_calendar import GoogleCalendarConnector, ServiceAccount, event_id
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.google_calendar import ServiceAccountKey
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.ledger import Request
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.wire.results import Status
from tests.connectors import vendor_api_facts as facts

FAST = RetryPolicy(max_attempts=3, base_backoff_s=0.01)
CALENDARS = "/calendar/v3/calendars/"


def _event(calendar: str | None = None, natural_id: str | None = None, **params: object) -> ActionCall:
    calendar = calendar or f"exec-{uuid.uuid4().hex[:8]}@runonce.local"
    return ActionCall(str(uuid.uuid4()), "schedule_calendar_event",
                      {"calendar_id": calendar, "start": "2026-12-01T15:00Z", "title": "Customer call",
                       "attendees": ["ana@x.com", "cust@y.com"], **params},
                      f"key-{uuid.uuid4().hex[:8]}", natural_id)


def _connector(local: LocalVendors) -> GoogleCalendarConnector:
    connector = registry.load(local.write_connectors(), {})["calendar"].connector
    assert isinstance(connector, GoogleCalendarConnector)
    return connector


def _calendar_requests(vendors: VendorServer, call: ActionCall) -> list[Request]:
    return vendors.ledger.requests(CALENDARS + str(call.params["calendar_id"]))


def _check_against_discovery(request: Request) -> None:
    """A recorded request, as the discovery document describes events.insert and events.get."""
    parts = urlsplit(request.path)
    rest = parts.path.removeprefix(facts.GOOGLE_CALENDAR_PREFIX)
    query = parse_qs(parts.query)
    method = facts.GOOGLE_EVENTS_INSERT if request.method == "POST" else facts.GOOGLE_EVENTS_GET
    assert request.method == method["httpMethod"]
    pattern = re.escape(str(method["path"])).replace(r"\{calendarId\}", "[^/]+").replace(r"\{eventId\}", "[^/]+")
    assert re.fullmatch(pattern, rest), rest
    assert set(query) <= method["query"], query  # type: ignore[operator]
    assert request.headers["authorization"] == "Bearer <redacted>"
    if request.method != "POST":
        return
    assert query["sendUpdates"][0] in facts.GOOGLE_EVENTS_INSERT["sendUpdates"]  # type: ignore[operator]
    assert request.headers["content-type"] == "application/json"
    event = json.loads(request.raw)
    assert set(event) <= facts.GOOGLE_EVENT_PROPERTIES, set(event) - facts.GOOGLE_EVENT_PROPERTIES
    assert facts.GOOGLE_EVENTS_INSERT["required"] <= set(event)  # type: ignore[operator]
    assert re.fullmatch(facts.GOOGLE_EVENT_ID_PATTERN, event["id"])
    for edge in ("start", "end"):
        assert set(event[edge]) <= facts.GOOGLE_EVENT_DATETIME
        if "dateTime" in event[edge]:  # RFC 3339 with an offset, or a timeZone beside it
            assert re.search(r"(Z|[+-]\d\d:\d\d)$", event[edge]["dateTime"]) or "timeZone" in event[edge]
    assert all(facts.GOOGLE_ATTENDEE_REQUIRED <= set(a) for a in event.get("attendees", []))


def test_an_event_is_inserted_as_calendar_v3_defines_it_with_a_service_accounts_token(
        local: LocalVendors, vendors: VendorServer) -> None:
    call = _event()
    response = _connector(local).perform(call)
    assert response.vendor_ref == event_id(call)
    (insert,) = _calendar_requests(vendors, call)
    _check_against_discovery(insert)
    assert json.loads(insert.raw)["attendees"] == [{"email": "ana@x.com"}, {"email": "cust@y.com"}]
    # google-auth traded a JWT signed with the key for the token (the sandbox verified the signature)
    (grant,) = vendors.ledger.requests("/token")
    form = parse_qs(grant.raw)
    assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"] and form["assertion"]
    claims = json.loads(_b64url(form["assertion"][0].split(".")[1]))
    assert set(claims["scope"].split()) <= facts.GOOGLE_SCOPES_FOR_INSERT
    assert vendors.state.google.tokens_issued == 1
    assert vendors.ledger.count("calendar", event_id(call)) == 1


def _b64url(text: str) -> bytes:
    import base64
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_a_lost_answer_inserts_again_and_the_calendar_refuses_the_copy(local: LocalVendors,
                                                                       vendors: VendorServer) -> None:
    """Google inserted the event, then the answer was lost: the runner inserts again with the
    same id, the calendar answers 409 duplicate, and the connector answers with the event."""
    call = _event()
    vendors.state.faults.add(VendorFault(CALENDARS + str(call.params["calendar_id"]), method="POST", drop_response=1))
    outcome = ActionRunner(_connector(local), FAST, sleep=lambda _s: None).perform(call)
    assert outcome.status is Status.SUCCEEDED and outcome.vendor_ref == event_id(call), outcome
    requests = _calendar_requests(vendors, call)
    assert [r.method for r in requests] == ["POST", "POST", "GET"]  # insert (lost), insert (409), read
    for request in requests:
        _check_against_discovery(request)
    assert vendors.ledger.count("calendar") == 1


def test_two_actions_with_one_natural_id_make_one_event_and_the_second_names_the_first(
        local: LocalVendors, vendors: VendorServer) -> None:
    calendar = f"exec-{uuid.uuid4().hex[:8]}@runonce.local"
    first, second = (_event(calendar, natural_id="schedule_calendar_event:nid=sha256:abc") for _ in range(2))
    assert first.vendor_key != second.vendor_key
    connector = _connector(local)
    a = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(first)
    b = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(second)
    assert (a.status, b.status) == (Status.SUCCEEDED, Status.SUCCEEDED)
    assert b.vendor_ref == a.vendor_ref
    assert vendors.ledger.count("calendar") == 1
    event = vendors.state.google.events[(calendar, str(a.vendor_ref))]
    assert event["extendedProperties"]["private"]["runonceActionId"] == first.action_id


def test_without_a_natural_id_each_vendor_key_is_an_event_of_its_own(local: LocalVendors,
                                                                      vendors: VendorServer) -> None:
    """The demo's "without runonce" path: seven fresh keys, seven events (the calendar dedups
    ids, not meetings)."""
    calendar = f"exec-{uuid.uuid4().hex[:8]}@runonce.local"
    connector = _connector(local)
    refs = {connector.perform(_event(calendar)).vendor_ref for _ in range(7)}
    assert len(refs) == 7 and vendors.ledger.count("calendar") == 7


def test_a_wrong_token_is_a_clear_permanent_failure_that_never_shows_it(vendors: VendorServer) -> None:
    wrong = f"ya29.{uuid.uuid4().hex}"
    connector = GoogleCalendarConnector("calendar", StaticBearer(Secret("env:GOOGLE_TOKEN", wrong)), VendorHttp(vendors.url))
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(_event())
    assert outcome.status is Status.FAILED, outcome
    assert "Google refused the credentials" in (outcome.error or "") and "UNAUTHENTICATED" in (outcome.error or "")
    assert wrong not in (outcome.error or "") and wrong not in repr(connector)
    assert vendors.ledger.count("calendar") == 0


def test_a_key_google_does_not_know_is_a_clear_permanent_failure_that_never_shows_it(
        local: LocalVendors, vendors: VendorServer) -> None:
    """A key of the right shape, signed by a key the project never issued: the token endpoint
    refuses the JWT (invalid_grant), and nothing reaches the calendar."""
    stranger = ServiceAccountKey(f"{local.http_url}/token").key_json()
    account = ServiceAccount(Secret("file:key.json", stranger), None, VendorHttp("", timeout_s=5.0))
    connector = GoogleCalendarConnector("calendar", account, VendorHttp(vendors.url))
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(_event())
    assert outcome.status is Status.FAILED, outcome
    assert "Google refused the service account key" in (outcome.error or "") and "invalid_grant" in (outcome.error or "")
    private_key = json.loads(stranger)["private_key"]
    assert private_key.splitlines()[1] not in (outcome.error or "") + repr(connector)
    assert vendors.ledger.requests(CALENDARS) == []


def test_the_calendar_refuses_what_google_refuses(local: LocalVendors, vendors: VendorServer) -> None:
    """The sandbox answers as the API does: a client id outside base32hex, no end, no offset."""
    from runonce.connectors.toolkit.errors import PermanentVendorError as Refused
    http = VendorHttp(vendors.url)
    auth = {"Authorization": f"Bearer {local.google_token}"}
    start = {"dateTime": "2026-12-01T15:00:00Z"}
    for body, said in (({"id": "UPPER-case", "start": start, "end": start}, "Invalid resource id value"),
                       ({"start": start}, "Missing end time"),
                       ({"start": {"dateTime": "2026-12-01T15:00:00"}, "end": start}, "Missing time zone"),
                       ({"start": start, "end": start, "summry": "typo"}, 'Unknown name "summry"')):
        with pytest.raises(Refused, match=said):
            http.json("POST", f"{CALENDARS}c1/events", body, headers=auth)


def test_a_calendar_that_does_not_exist_fails_with_googles_reason(local: LocalVendors) -> None:
    outcome = ActionRunner(_connector(local), FAST, sleep=lambda _s: None).perform(_event("nowhere@runonce.local"))
    assert outcome.status is Status.FAILED and "notFound" in (outcome.error or ""), outcome


@pytest.mark.parametrize("params, said", [
    ({"start": "2026-12-01T15:00"}, "needs a time zone offset"),
    ({"start": "tomorrow"}, "must be an ISO 8601 time"),
    ({"attendees": "ana@x.com"}, "must be a list of email addresses"),
    ({"end": "2026-12-01T14:00Z"}, "ends before it starts"),
])
def test_params_the_api_would_refuse_fail_before_any_call(local: LocalVendors, vendors: VendorServer,
                                                         params: dict[str, object], said: str) -> None:
    with pytest.raises(PermanentVendorError, match=said):
        _connector(local).perform(_event(**params))
    assert vendors.ledger.requests(CALENDARS) == []


def test_times_become_the_apis_event_date_times(local: LocalVendors, vendors: VendorServer) -> None:
    connector = _connector(local)
    for params, start, end in (
            ({"start": "2026-12-01", "attendees": []}, {"date": "2026-12-01"}, {"date": "2026-12-02"}),
            ({"start": "2026-12-01T15:00", "time_zone": "Europe/Zurich", "duration_min": 45},
             {"dateTime": "2026-12-01T15:00:00", "timeZone": "Europe/Zurich"},
             {"dateTime": "2026-12-01T15:45:00", "timeZone": "Europe/Zurich"})):
        call = _event(**params)
        connector.perform(call)
        (insert,) = _calendar_requests(vendors, call)
        _check_against_discovery(insert)
        assert (json.loads(insert.raw)["start"], json.loads(insert.raw)["end"]) == (start, end)


@given(natural_id=st.one_of(st.none(), st.text(min_size=1)), vendor_key=st.text(min_size=1))
def test_an_event_id_is_base32hex_and_follows_the_natural_id(natural_id: str | None, vendor_key: str) -> None:
    call = ActionCall("a", "schedule_calendar_event", {}, vendor_key, natural_id)
    eid = event_id(call)
    assert re.fullmatch(facts.GOOGLE_EVENT_ID_PATTERN, eid) and len(eid) == 52
    other_key = ActionCall("b", "schedule_calendar_event", {}, vendor_key + "x", natural_id)
    assert (event_id(other_key) == eid) is (natural_id is not None)


def test_the_connectors_file_takes_one_credential_and_never_a_plain_one(tmp_path: object, local: LocalVendors) -> None:
    from pathlib import Path

    from runonce.errors import ConfigError

    folder = Path(str(tmp_path))
    for table, said in (
            ('service_account_key = { file = "%s" }\ntoken = { env = "T" }' % local.google_key_file, "give one of"),
            ('token = "ya29.plain"', "never the value"),
            ('token = { env = "T" }\nsubject = "ana@x.com"', "impersonates a user"),
            ('token = { env = "T" }\nsend_updates = "everyone"', "must be one of all, externalOnly, none")):
        path = folder / "connectors.toml"
        path.write_text(f'[vendors.calendar]\nkind = "google-calendar"\nbase_url = "{local.http_url}"\n{table}\n')
        with pytest.raises(ConfigError, match=said):
            registry.load(path, {"T": "ya29.x"})
