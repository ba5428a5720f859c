"""The gateway's HTTP door over an ASGI test client, with the real app (routes, the mcp
package's bearer middleware, the tokens file) and a recording stand-in for the SDK client
(no Kafka in a unit test): who the caller is, what reaches the client, and every refusal's
status."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from runonce import tokens
from runonce.core.policy import PolicyBook
from runonce.errors import BrokerUnavailable, ResultTimeout, RunonceError
from runonce.gateway import server
from runonce.gateway.app import create_gateway_app
from runonce.gateway.calls import HELD_SLICE_S, Calls
from runonce.gateway.http_api import HttpApi
from runonce.sdk.client import ActionOutcome, HeldFor
from runonce.wire.results import CallStatus

BOOK = PolicyBook.load()


class _Handle:
    def __init__(self, action_id: str, outcome: ActionOutcome | None) -> None:
        self.action_id, self.outcome, self.held = action_id, outcome, None
        self.requested_at: tuple[int, int] | None = None

    def result(self, timeout: float = 60.0) -> ActionOutcome:
        if self.outcome is None:
            raise ResultTimeout("no outcome yet")
        return self.outcome


class RecordingClient:
    """What Calls needs of ActionClient: records each submit; answers succeeded, or raises."""

    def __init__(self) -> None:
        self.policies = BOOK
        self.submitted: list[dict[str, Any]] = []
        self.raises: RunonceError | None = None
        #: the broker's answer to a reachability question is held until this is set (a broker away)
        self.broker_answers = threading.Event()
        self.broker_answered = 0

    def unreachable(self, timeout_s: float = 2.0) -> str | None:
        self.broker_answers.wait(10)
        self.broker_answered += 1
        return "Kafka did not answer within 2 s"

    def submit(self, tool: str, params: Any, **kwargs: Any) -> _Handle:
        if self.raises is not None:
            raise self.raises
        action_id = str(uuid.uuid4())
        self.submitted.append({"tool": tool, "params": params, **kwargs})
        if params.get("amount_cents") == 999:  # the stream job's answer to a key reused with other params
            return _Handle(action_id, ActionOutcome(action_id, CallStatus.DROPPED, action_id,
                                                    drop_reason="key_payload_mismatch"))
        return _Handle(action_id, ActionOutcome(action_id, CallStatus.SUCCEEDED, action_id, "ch_1"))


@pytest.fixture()
def door(tmp_path: Path) -> tuple[TestClient, RecordingClient, dict[str, str]]:
    path = tmp_path / "gateway.tokens"
    issued = {"billing": tokens.add(path, "billing", frozenset({"charge_payment"})),
              "dispatch-1": tokens.add(path, "dispatch-1", None, "outreach")}
    client = RecordingClient()
    calls = Calls(client)  # type: ignore[arg-type]
    app = create_gateway_app(server.create_gateway(calls, BOOK), HttpApi(calls, default_wait_s=0.1, max_wait_s=5), BOOK, path)
    return TestClient(app, raise_server_exceptions=False), client, issued


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_key_reaches_the_client_and_the_agent_and_tenant_come_from_the_token(door: Any) -> None:
    http, client, issued = door
    ok = http.post("/v1/actions/charge_payment", json={"card": "tok", "amount_cents": 5},
                   headers={**_auth(issued["billing"]), "Idempotency-Key": "order-7"})
    shared = http.post("/v1/actions/send_email", json={"to": "j@example.com"},
                       headers={**_auth(issued["dispatch-1"]), "X-Agent": "someone-else"})
    assert (ok.status_code, shared.status_code) == (200, 200), (ok.text, shared.text)
    first, second = client.submitted
    assert (first["idempotency_key"], first["agent_id"], first["tenant"]) == ("order-7", "billing", "billing")
    assert (second["idempotency_key"], second["agent_id"], second["tenant"]) == (None, "dispatch-1", "outreach")


def test_each_refusal_has_its_status_and_none_is_a_500(door: Any) -> None:
    http, client, issued = door
    billing = {**_auth(issued["billing"]), "Idempotency-Key": "order-9"}
    assert http.post("/v1/actions/charge_payment", json={}).status_code == 401
    assert http.post("/v1/actions/charge_payment", json={}, headers=_auth("forged")).status_code == 401
    assert http.post("/v1/actions/send_email", json={}, headers=billing).status_code == 403
    assert http.post("/v1/actions/no_such_tool", json={}, headers=billing).status_code == 404
    assert http.post("/v1/actions/charge_payment", content=b"[1, 2",
                     headers={**billing, "Content-Type": "application/json"}).status_code == 400
    assert http.post("/v1/actions/charge_payment?wait=99", json={}, headers=billing).status_code == 400
    assert http.post("/v1/actions/charge_payment?wiat=1", json={}, headers=billing).status_code == 400
    assert http.get(f"/v1/actions/{uuid.uuid4()}", headers=billing).status_code == 404
    # the key charge_payment's policy requires, and a body that is not JSON: refused at the door
    keyless = http.post("/v1/actions/charge_payment", json={"card": "tok"}, headers=_auth(issued["billing"]))
    assert keyless.status_code == 400 and "needs an Idempotency-Key" in keyless.json()["error"], keyless.text
    assert "action_id" not in keyless.json()
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        typed = http.post("/v1/actions/charge_payment", content=b'{"card": "tok"}',
                          headers={**billing, "Content-Type": content_type})
        assert typed.status_code == 415 and "application/json" in typed.text, (content_type, typed.text)
    untyped = http.post("/v1/actions/charge_payment", content=b'{"card": "tok"}', headers=billing)  # no Content-Type
    assert "content-type" not in {k.lower() for k in untyped.request.headers}
    assert untyped.status_code == 415 and "application/json" in untyped.text, untyped.text
    assert client.submitted == []  # none of the refusals above was published
    misused = http.post("/v1/actions/charge_payment", json={"amount_cents": 999},
                        headers={**billing, "Idempotency-Key": "order-7"})
    assert misused.status_code == 422 and misused.json()["reason"] == "key_payload_mismatch"
    client.submitted.clear()
    client.raises = BrokerUnavailable("cannot reach Kafka")
    down = http.post("/v1/actions/charge_payment", json={}, headers=billing)
    assert down.status_code == 503 and down.headers["retry-after"] and "Traceback" not in down.text
    assert client.submitted == []  # nothing refused reached the client


def test_an_oversize_body_is_refused_by_its_length_and_while_reading(door: Any) -> None:
    """The documented bound, 512 KiB, written here (not read from limits): a raised limit fails it."""
    http, client, issued = door
    billing = {**_auth(issued["billing"]), "Idempotency-Key": "order-8", "Content-Type": "application/json"}
    big = b'{"pad": "' + b"x" * (512 * 1024) + b'"}'
    declared = http.post("/v1/actions/charge_payment", content=big, headers=billing)
    chunked = http.post("/v1/actions/charge_payment", content=iter([big[:1000], big[1000:]]), headers=billing)
    assert (declared.status_code, chunked.status_code) == (413, 413), (declared.text, chunked.text)
    assert client.submitted == []
    under = b'{"pad": "' + b"x" * (512 * 1024 - 100) + b'"}'  # under the bound: read whole, handed on
    answer = http.post("/v1/actions/charge_payment", content=under, headers=billing)
    assert answer.status_code == 200 and len(client.submitted) == 1, answer.text


def test_another_tenants_action_is_not_found(door: Any) -> None:
    http, _, issued = door
    taken = http.post("/v1/actions/charge_payment", json={"card": "tok", "amount_cents": 5},
                      headers={**_auth(issued["billing"]), "Idempotency-Key": "order-10"}).json()
    assert http.get(f"/v1/actions/{taken['action_id']}?wait=0", headers=_auth(issued["billing"])).status_code == 200
    assert http.get(f"/v1/actions/{taken['action_id']}?wait=0", headers=_auth(issued["dispatch-1"])).status_code == 404


def test_the_tokens_file_holds_a_sha256_no_one_can_turn_back_into_the_token(tmp_path: Path) -> None:
    """Memory SHA-256 vectors, and the file holds nothing from which the token follows."""
    assert tokens.token_digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert tokens.token_digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    path = tmp_path / "gateway.tokens"
    token = tokens.add(path, "billing", None)
    text = path.read_text()
    assert hashlib.sha256(token.encode()).hexdigest() in text
    assert token not in text and token.encode().hex() not in text and len(text.split(":")[1].strip()) == 64
    assert tokens.who(path, token) is not None and tokens.who(path, token + "x") is None


class _HeldHandle(_Handle):
    """An action held for a person from the start: every wait for its outcome times out; records
    how long each wait was asked to be."""

    def __init__(self, action_id: str) -> None:
        super().__init__(action_id, None)
        self.held = HeldFor("more than 10 blind copies", 1_900_000_000_000)
        self.asked_s: list[float] = []

    def result(self, timeout: float = 60.0) -> ActionOutcome:
        self.asked_s.append(timeout)
        raise ResultTimeout("held")


def test_a_held_call_is_answered_held_at_once_with_a_retry_after_that_fits_approvals(tmp_path: Path) -> None:
    """Catches: a held call waiting out the whole wait before it says "held" (30 s over HTTP and
    MCP though the hold was known in under a second), and a held answer's Retry-After of 1 s for
    a hold that can last a day. Over POST and over GET ?wait=."""
    path = tmp_path / "gateway.tokens"
    token = tokens.add(path, "dispatch-1", None)
    handles: list[_HeldHandle] = []

    class Holding(RecordingClient):
        def submit(self, tool: str, params: Any, **kwargs: Any) -> _Handle:
            handles.append(_HeldHandle(str(uuid.uuid4())))
            return handles[-1]

    calls = Calls(Holding())  # type: ignore[arg-type]
    api = HttpApi(calls, default_wait_s=30, max_wait_s=600, held_retry_after_s=120)
    http = TestClient(create_gateway_app(server.create_gateway(calls, BOOK), api, BOOK, path), raise_server_exceptions=False)
    posted = http.post("/v1/actions/send_email?wait=600", json={"to": "j@example.com"}, headers=_auth(token))
    assert posted.status_code == 202 and posted.json()["status"] == CallStatus.HELD, posted.text
    assert posted.headers["Retry-After"] == "120"
    got = http.get(f"/v1/actions/{handles[0].action_id}?wait=600", headers=_auth(token))
    assert got.status_code == 202 and got.json()["status"] == CallStatus.HELD, got.text
    assert got.headers["Retry-After"] == "120"
    # one short look each, never the 600 s asked for: the hold was known at the first look
    assert len(handles[0].asked_s) == 2 and max(handles[0].asked_s) <= HELD_SLICE_S, handles[0].asked_s


def test_readiness_answers_at_once_while_the_broker_takes_its_time(tmp_path: Path) -> None:
    """A kubelet's probe gives up after 1 s by default; asking Kafka takes seconds while it is
    away. /readyz answers 200 while the question is still out, and names the broker's state once
    it is known. Catches /readyz asking the broker on the probe's time (found on the real
    cluster: every gateway left its Service in a broker cut, agents were refused): the answer
    comes only after the broker's, 10 s here."""
    path = tmp_path / "gateway.tokens"
    client = RecordingClient()
    calls = Calls(client)  # type: ignore[arg-type]
    app = create_gateway_app(server.create_gateway(calls, BOOK), HttpApi(calls, default_wait_s=0.1, max_wait_s=5), BOOK, path)
    with TestClient(app) as http:  # the lifespan runs: the broker watch with it
        first = http.get("/readyz")
        answered_before = client.broker_answered
        client.broker_answers.set()
        deadline = time.monotonic() + 10
        # "the broker not asked yet" says the same 503 sentence: wait for the broker's own answer
        while "Kafka did not answer" not in (later := http.get("/readyz")).text:
            assert time.monotonic() < deadline, later.text
            time.sleep(0.05)
    assert first.status_code == 200 and answered_before == 0, (first.text, answered_before)
    assert later.status_code == 200 and "calls answer 503 until the broker is back" in later.text, later.text
