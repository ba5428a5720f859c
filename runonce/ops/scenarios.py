"""The seed's incidents as sequences of action requests, for the demo, tests and benchmarks.

Each incident lists what the agents sent and what runonce should make of it under the
shipped policies: how many actions get through, and why the rest are dropped.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from runonce.core.decision import Reason


@dataclass(frozen=True, slots=True)
class Request:
    tool: str
    params: dict[str, Any]
    idempotency_key: str | None = None
    natural_id: str | None = None
    agent_id: str = "agent"


@dataclass(frozen=True, slots=True)
class Incident:
    name: str
    story: str
    requests: tuple[Request, ...]
    expected_approved: int
    #: the drop reason the repeats should get
    expected_reason: str
    notes: str = ""
    tags: tuple[str, ...] = field(default=())


def _run_id() -> str:
    return uuid.uuid4().hex[:8]


def incidents(run_id: str | None = None) -> list[Incident]:
    """Fresh incidents; ``run_id`` makes recipients/keys unique so runs never collide."""
    r = run_id or _run_id()
    email = {"to": f"john+{r}@prospect.example", "subject": "Following up",
             "body": "Hi John, thanks for your reply...", "campaign_id": "q4"}
    lead_email = {"to": f"lead+{r}@example.com", "subject": "Quick intro", "body": "Approved draft #1"}
    return [
        Incident("email_timeout_retries", "47 copies of one email after timeout retries (no key)",
                 tuple(Request("send_email", email) for _ in range(47)), 1, Reason.DUPLICATE_KEY.value,
                 "unkeyed: the content-derived key catches the retries"),
        Incident("approval_race", "871 emails from two workers racing on one approval",
                 tuple(Request("send_email", lead_email, idempotency_key=f"dispatch-{r}-{i}",
                               agent_id=f"worker-{i % 2}") for i in range(871)),
                 1, Reason.CONTENT_WINDOW.value, "each dispatch had its own key: the recipient+content window catches them"),
        Incident("card_charged_four_times", "a card charged four times by a retrying booking agent",
                 tuple(Request("charge_payment", {"card": f"card-{r}", "amount_cents": 41_900, "currency": "usd"},
                               idempotency_key=f"booking-{r}") for _ in range(4)), 1, Reason.DUPLICATE_KEY.value),
        Incident("duplicate_tickets", "312 duplicate tickets",
                 tuple(Request("create_jira_ticket", {"project": "SUP", "customer_id": f"cust-{r}",
                                                      "description": "Login fails with SSO", "summary": f"try {i}"},
                               idempotency_key=f"ticket-{r}-{i}") for i in range(312)),
                 1, Reason.NATURAL_ID_TAKEN.value),
        Incident("slack_reposts", "18 Slack reposts of one alert",
                 tuple(Request("post_slack_message", {"channel": f"#incidents-{r}", "text": "DB latency p99 > 2s"},
                               idempotency_key=f"alert-{r}-db-latency") for _ in range(18)), 1, Reason.DUPLICATE_KEY.value,
                 "the agent passes the alert's id as its key: reposts are retries"),
        Incident("calendar_copies", "7 copies of one calendar event",
                 tuple(Request("schedule_calendar_event", {"calendar_id": f"exec-{r}", "start": "2026-12-01T15:00Z",
                                                           "attendees": ["ana@x.com", "cust@y.com"],
                                                           "title": "Customer call"},
                               idempotency_key=f"cal-{r}-{i}") for i in range(7)), 1, Reason.NATURAL_ID_TAKEN.value),
        Incident("restart_loop", "47 restarts of a crashing container",
                 tuple(Request("restart_service", {"service": f"api-{r}", "host": "srv-2"}) for _ in range(47)),
                 5, Reason.BUDGET_EXHAUSTED.value),
        # Not one of the seed's rows: what the shipped Slack policy does when the agent sends no key.
        Incident("slack_reposts_unkeyed", "18 Slack reposts of one alert, without a key",
                 tuple(Request("post_slack_message", {"channel": f"#status-{r}", "text": "DB latency p99 > 2s"})
                       for _ in range(18)), 18, Reason.CONTENT_WINDOW_AUDIT.value,
                 "post_slack_message audits repeats within 5 min: approved and flagged, not blocked",
                 tags=("footnote",)),
    ]


def approval_race(run_id: str | None = None) -> Incident:
    """The 871-email race with a person's approval required (the shipped policy holds an email
    with more than 10 blind copies): two dispatch workers both read the approval as pending,
    both send the campaign and both approve it. Without runonce each worker's send is an email."""
    r = run_id or _run_id()
    campaign = {"to": f"lead+{r}@example.com", "subject": "Q4 offer", "body": "Approved draft #1",
                "bcc": [f"list-{i}+{r}@example.com" for i in range(25)]}
    return Incident("approval_race_held", "871-email race, approval required, two approvers",
                    tuple(Request("send_email", campaign, idempotency_key=f"campaign-{r}-worker-{i}",
                                  agent_id=f"worker-{i}") for i in range(2)),
                    1, Reason.CONTENT_WINDOW.value,
                    "held for approval (25 blind copies); both workers' approvals are verdicts: the first "
                    "releases it, the second changes nothing")


def refund_race(run_id: str | None = None) -> Incident:
    """The seed's refund: an agent retries one order's refund 3 times on slow answers (one key),
    and a second worker, reading the order as still pending, refunds it twice more (its own
    key). Without runonce each is a row in the team's own ``refunds`` table."""
    r = run_id or _run_id()
    order = {"order_id": f"order-{r}", "amount_cents": 4999}
    retries = tuple(Request("issue_refund", order, idempotency_key=f"refund-{r}-a", agent_id="support-agent")
                    for _ in range(3))
    racing = tuple(Request("issue_refund", order, idempotency_key=f"refund-{r}-b", agent_id="billing-worker")
                   for _ in range(2))
    return Incident("refund_race", "a refund retried 5 times by two workers (your database)",
                    retries + racing, 1, Reason.NATURAL_ID_TAKEN.value,
                    "counted with SELECT count(*) on the refunds table of a real PostgreSQL")
