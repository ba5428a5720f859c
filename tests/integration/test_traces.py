"""One action in the agent's own trace, read back from a real Jaeger (runonce/testkit/jaeger.py)
by trace id: the agent's span, runonce's submit, the stream worker's decision, the executor's
``execute_tool`` and the vendor's request (stripe-mock's HTTP, Mailpit's SMTP), each process
exporting over OTLP as the standard ``OTEL_*`` variables ask. A retry is a trace of its own,
linked to the first; a held email's trace has the wait for a person as a span of its own.

Every span's attributes and names are searched for the planted secrets: the vendors' key and
password, and a value from the params."""

from __future__ import annotations

import json
import os
import secrets
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

import pytest

from runonce.approvals.client import Approvals
from runonce.core.approval import Verdict
from runonce.kafka import topics
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.client import ActionClient
from runonce.settings import Settings
from runonce.testkit.jaeger import Jaeger, Span
from runonce.testkit.vendor_servers import Mailpit, StripeMock
from tests.support.worker import RunonceProcess, WorkerProcess, start_group_at_end

pytestmark = [pytest.mark.broker, pytest.mark.slow]

STRIPE_KEY = f"sk_test_{secrets.token_hex(16)}"
SMTP_PASSWORD = f"pw-{secrets.token_hex(16)}"
PLANTED_BODY = f"planted-body-{secrets.token_hex(8)}"
CLIENT, PRODUCER, CONSUMER, INTERNAL = 3, 4, 5, 1


class Traced:
    def __init__(self, broker: Settings, jaeger: Jaeger, mailpit: Mailpit, decisions: DecisionWatcher) -> None:
        self.bootstrap = broker.bootstrap_servers()
        self.jaeger, self.mailpit, self.decisions = jaeger, mailpit, decisions
        self.processes: list[RunonceProcess] = []

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.processes)


@pytest.fixture(scope="module")
def traced(broker: Settings, decision_log: DecisionWatcher,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    folder = tmp_path_factory.mktemp("traces")
    jaeger = Jaeger(folder / "jaeger").start()
    stripe = StripeMock(folder / "stripe-mock").start()
    mailpit = Mailpit(folder / "mailpit", "starttls", "agent-relay", SMTP_PASSWORD).start()
    connectors = folder / "connectors.toml"
    connectors.write_text(f'[vendors.payments]\nkind = "stripe"\nbase_url = "{stripe.url}"\n'
                          f'api_key = {{ env = "RUNONCE_TEST_STRIPE_KEY" }}\n\n' + mailpit.connectors_toml())
    env = {"RUNONCE_CONNECTORS": str(connectors), "RUNONCE_TEST_STRIPE_KEY": STRIPE_KEY, **mailpit.secrets_env()}
    stack = Traced(broker, jaeger, mailpit, decision_log)
    worker = WorkerProcess(broker, "traced-worker", folder, extra_env=jaeger.otel_env("runonce-worker"))
    stack.processes.append(worker)
    run = uuid.uuid4().hex[:6]
    for vendor in ("payments", "email"):
        group = f"runonce-exec-traced-{vendor}-{run}"
        start_group_at_end(stack.bootstrap, group)
        stack.processes.append(RunonceProcess(
            broker, f"traced-exec-{vendor}", ["executor", "--vendor", vendor, "--group", group], folder,
            {**env, **jaeger.otel_env(f"runonce-executor-{vendor}")}))
    try:
        for p in stack.processes:
            p.start()
        yield stack
    finally:
        for p in stack.processes:
            p.stop()
        for server in (mailpit, stripe, jaeger):
            server.stop()


@pytest.fixture
def agent(traced: Traced) -> Iterator[tuple[object, ActionClient]]:
    """An agent application with its own OpenTelemetry provider, exporting to the same Jaeger."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from runonce.telemetry.otel import OtelSpans

    provider = TracerProvider(resource=Resource.create({"service.name": "billing-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=traced.jaeger.otlp_traces_url)))
    with ActionClient(traced.bootstrap, agent_id="traced-agent", spans=OtelSpans(provider)) as client:
        yield provider.get_tracer("billing-agent"), client
    provider.shutdown()


def _hex(trace_id: int, width: int = 32) -> str:
    return f"{trace_id:0{width}x}"


def _one(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [(s.service, s.name) for s in spans])
    return found[0]


def _child(spans: list[Span], parent: Span, name: str) -> Span:
    child = _one(spans, name)
    assert child.parent_span_id == parent.span_id, (
        f"{name} is not a child of {parent.name}", [(s.name, s.span_id, s.parent_span_id) for s in spans])
    return child


def keep(jaeger: Jaeger, trace_id: str, name: str) -> None:
    """Jaeger's answer, kept where ``RUNONCE_TRACES_OUT`` says (scripts/trace_picture.sh draws
    the docs' picture from it); nothing without it."""
    folder = os.environ.get("RUNONCE_TRACES_OUT")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(jaeger.answer(trace_id), indent=1))


def _no_secret(spans: list[Span], *planted: str) -> None:
    text = json.dumps([asdict(s) for s in spans])
    for secret in planted:
        assert secret not in text, f"a planted secret is in a span: {secret[:12]}..."


def test_a_charge_is_one_trace_from_the_agents_span_to_stripes_answer_and_its_retry_links_to_it(
        traced: Traced, agent: tuple[object, ActionClient]) -> None:
    """Catches: the stream job not copying the context onto the approved record, or the
    executor not taking it (execute_tool in a trace of its own: not found under the decision);
    the vendor request not under execute_tool; the retry's drop without its link to the first
    (or in the first's trace); a key, a card token or an amount in any span."""
    tracer, client = agent
    key = f"traced-{uuid.uuid4().hex[:8]}"
    params = {"card": "tok_visa", "amount_cents": 4242, "description": PLANTED_BODY}
    with tracer.start_as_current_span("invoke_agent billing") as turn:  # type: ignore[attr-defined]
        first = client.submit("charge_payment", params, idempotency_key=key)
        assert first.result(60).status == "succeeded", traced.describe()
    with tracer.start_as_current_span("invoke_agent billing (retried)") as retry_turn:  # type: ignore[attr-defined]
        again = client.submit("charge_payment", params, idempotency_key=key)
        outcome = again.result(60)
    assert outcome.result_of == first.action_id

    trace_id = _hex(turn.get_span_context().trace_id)
    spans = traced.jaeger.wait_for(trace_id, lambda ss: any(s.name == "POST" for s in ss))
    keep(traced.jaeger, trace_id, "charge")
    root = _one(spans, "invoke_agent billing")
    submit = _child(spans, root, f"send {topics.REQUESTED}")
    decide = _child(spans, submit, "decide charge_payment")
    execute = _child(spans, decide, "execute_tool charge_payment")
    stripe = _child(spans, execute, "POST")
    assert (submit.kind, decide.kind, execute.kind, stripe.kind) == (PRODUCER, CONSUMER, INTERNAL, CLIENT)
    assert (decide.service, decide.attributes["runonce.decision.outcome"]) == ("runonce-worker", "APPROVED")
    assert execute.service == "runonce-executor-payments"
    assert execute.attributes["gen_ai.tool.call.id"] == first.action_id
    assert execute.attributes["runonce.outcome"] == "succeeded" and execute.attributes["runonce.attempts"] == 1
    assert execute.attributes["runonce.capability"] == "vendor_key"
    assert stripe.attributes["url.full"].endswith("/v1/charges") and stripe.attributes["http.response.status_code"] == 200

    retry_id = _hex(retry_turn.get_span_context().trace_id)
    retried = traced.jaeger.wait_for(retry_id, lambda ss: any(s.name == "decide charge_payment" for s in ss))
    drop = _child(retried, _child(retried, _one(retried, "invoke_agent billing (retried)"),
                                  f"send {topics.REQUESTED}"), "decide charge_payment")
    assert drop.attributes["runonce.decision.outcome"] == "DROPPED"
    assert drop.attributes["runonce.decision.reason"] == "duplicate_key"
    assert drop.attributes["runonce.decision.repeat_of"] == first.action_id
    assert drop.links == ((trace_id, submit.span_id),)  # to the first action's trace
    assert not [s for s in retried if s.name.startswith("execute_tool")]  # nothing performed again
    _no_secret(spans + retried, STRIPE_KEY, "tok_visa", PLANTED_BODY, key)


def test_a_held_email_waits_for_a_person_in_a_span_of_its_own_then_is_sent_in_the_same_trace(
        traced: Traced, agent: tuple[object, ActionClient]) -> None:
    """Catches: the hold not keeping its context (the release, its execution and the SMTP
    send in a new trace); no wait span, or one that does not last from hold to verdict; the
    SMTP password or the body in a span."""
    tracer, client = agent
    to = f"lead-{uuid.uuid4().hex[:8]}@prospect.example"
    email = {"to": to, "subject": "Our launch", "body": PLANTED_BODY,
             "bcc": [f"list-{i}@prospect.example" for i in range(11)]}  # over 10: a person approves
    with tracer.start_as_current_span("invoke_agent newsletter") as turn:  # type: ignore[attr-defined]
        handle = client.submit("send_email", email)
    held = traced.decisions.wait([handle.action_id], timeout_s=60)[handle.action_id]
    assert held["outcome"] == "HELD", held
    time.sleep(1.0)  # a person takes a moment
    with Approvals(traced.bootstrap, "gina") as gina:
        assert gina.verdict(handle.action_id, Verdict.APPROVE, wait_s=60).change == "release"
    assert handle.result(60).status == "succeeded", traced.describe()
    assert traced.mailpit.received_by().get(to) == 1

    trace_id = _hex(turn.get_span_context().trace_id)
    spans = traced.jaeger.wait_for(trace_id, lambda ss: any(s.name == "smtp send" for s in ss))
    keep(traced.jaeger, trace_id, "held-email")
    submit = _child(spans, _one(spans, "invoke_agent newsletter"), f"send {topics.REQUESTED}")
    hold, release = sorted((s for s in spans if s.name == "decide send_email"), key=lambda s: s.start_ns)
    assert hold.parent_span_id == submit.span_id and hold.attributes["runonce.decision.outcome"] == "HELD"
    wait = _child(spans, hold, "wait_for_approval send_email")
    assert wait.attributes["runonce.approval.decided_by"] == "gina"
    assert wait.end_ns - wait.start_ns >= 900_000_000  # from the hold to gina's verdict
    assert release.parent_span_id == wait.span_id and release.attributes["runonce.decision.outcome"] == "APPROVED"
    execute = _child(spans, release, "execute_tool send_email")
    smtp = _child(spans, execute, "smtp send")
    assert smtp.kind == CLIENT and smtp.attributes["server.port"] == traced.mailpit.smtp_port
    _no_secret(spans, SMTP_PASSWORD, PLANTED_BODY, to)
