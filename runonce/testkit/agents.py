"""Agents as the partition tests and the storm play them: a plain HTTP client of the gateway's
API that calls until it has a final answer, with one Idempotency-Key, waiting what each 503
asks (``Retry-After``), and keeps every answer it was given."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any


def http(method: str, url: str, token: str | None = None, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    """One request with a plain HTTP client: (status, headers by lower-case name, JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {}),
        **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=90) as answer:
            status, got, raw = answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as refused:
        status, got, raw = refused.code, dict(refused.headers), refused.read()
    try:
        return status, {k.lower(): v for k, v in got.items()}, json.loads(raw or b"null")
    except ValueError:
        return status, {k.lower(): v for k, v in got.items()}, raw.decode(errors="replace")


@dataclass
class Agent:
    """One agent's charge (``charge_payment``) and what it was answered."""

    key: str
    amount_cents: int
    #: every answer: (status, Retry-After or None, whether the link was cut all the while it waited)
    answers: list[tuple[int, str | None, bool]] = field(default_factory=list)
    final: dict[str, Any] | None = None


def charge_until_final(url: str, token: str, agent: Agent, cut: threading.Event, deadline: float) -> None:
    """Call until a 200 (or an answer no agent would retry), honouring each 503's Retry-After."""
    while time.monotonic() < deadline:
        during_cut = cut.is_set()
        status, headers, body = http("POST", f"{url}/v1/actions/charge_payment?wait=20", token,
                                     {"card": "tok", "amount_cents": agent.amount_cents},
                                     {"Idempotency-Key": agent.key})
        agent.answers.append((status, headers.get("retry-after"), during_cut and cut.is_set()))
        if status == 200:
            agent.final = body
            return
        if status == 503:
            time.sleep(float(headers.get("retry-after") or 1))
        elif status != 202:
            return  # anything else is an answer the caller refuses
