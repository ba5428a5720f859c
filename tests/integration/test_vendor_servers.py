"""The connectors against the vendors' own servers, not runonce's sandbox: Stripe's
``stripe-mock`` (every request checked against Stripe's OpenAPI spec) and Mailpit, an SMTP
relay requiring STARTTLS (as on 587), or TLS from the first byte (as on 465), and AUTH each
time. What Mailpit received is counted through Mailpit's own API; the planted secrets are then
looked for in every log, topic and printed line of the run."""

from __future__ import annotations

import secrets
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from runonce.connectors.executor import registry
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.kafka import topics
from runonce.kafka.reader import read_all
from runonce.ops import child
from runonce.ops.scenarios import incidents
from runonce.ops.watch import DecisionWatcher, ResultWatcher
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from runonce.testkit.vendor_servers import Mailpit, StripeMock
from tests.integration.test_executor import approve_all, own_approved_topic
from tests.support.worker import RunonceProcess, WorkerProcess, start_group_at_end

pytestmark = pytest.mark.broker

#: planted: each must never appear in a log, a topic or a printed line
STRIPE_KEY = f"sk_test_{secrets.token_hex(16)}"
SMTP_PASSWORD = f"pw-{secrets.token_hex(16)}"
WRONG_PASSWORD = f"wrong-{secrets.token_hex(16)}"
PLANTED = (STRIPE_KEY, SMTP_PASSWORD, WRONG_PASSWORD)
#: the approved topics of this module's own, read with runonce's by the last test
SOURCES: list[str] = []


@pytest.fixture(scope="module")
def stripe_mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StripeMock]:
    server = StripeMock(tmp_path_factory.mktemp("stripe-mock")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["starttls", "implicit"])
def mailpit(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mailpit]:
    server = Mailpit(tmp_path_factory.mktemp(f"mailpit-{request.param}"), request.param, "agent-relay",
                     SMTP_PASSWORD).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every process of this module logs here; the last test reads all of it."""
    return tmp_path_factory.mktemp("vendor-server-logs")


def connectors_file(folder: Path, stripe: StripeMock, mail: Mailpit | None) -> tuple[Path, dict[str, str]]:
    path = folder / f"connectors-{uuid.uuid4().hex[:6]}.toml"
    text = (f'[vendors.payments]\nkind = "stripe"\nbase_url = "{stripe.url}"\n'
            f'api_key = {{ env = "RUNONCE_TEST_STRIPE_KEY" }}\n\n')
    path.write_text(text + (mail.connectors_toml() if mail is not None else ""))
    return path, {"RUNONCE_TEST_STRIPE_KEY": STRIPE_KEY, **(mail.secrets_env() if mail is not None else {})}


def test_stripe_mock_accepts_the_charge_its_retry_with_the_same_key_and_the_probe(
        stripe_mock: StripeMock, tmp_path: Path) -> None:
    """stripe-mock refuses what Stripe refuses: no key (401), a JSON body, a field Stripe does
    not have (400). Each of the connector's requests is answered 200, with a charge."""
    path, env = connectors_file(tmp_path, stripe_mock, None)
    payments = registry.load(path, env)["payments"].connector
    call = ActionCall(str(uuid.uuid4()), "charge_payment",
                      {"card": "tok_visa", "amount_cents": 41900, "currency": "USD", "description": "booking"},
                      f"booking-{uuid.uuid4().hex[:8]}")
    first = payments.perform(call)
    again = payments.perform(call)  # what the runner sends after an unknown outcome: the same key
    assert first.vendor_ref.startswith("ch_") and again.vendor_ref.startswith("ch_"), (first, again)
    assert first.detail == "succeeded"
    assert "GET /v1/balance answered 200" in getattr(payments, "probe")()


@pytest.mark.parametrize("stream_worker", ["transactional"], indirect=True)
def test_the_47_email_incident_reaches_a_starttls_relay_once(
        broker: Settings, stream_worker: WorkerProcess, decision_log: DecisionWatcher, mailpit: Mailpit,
        stripe_mock: StripeMock, logs: Path) -> None:
    """The seed's 47 timeout retries, through the stream job and the email executor, to a relay
    that requires TLS and AUTH: Mailpit's own API counts one message for the recipient."""
    path, env = connectors_file(logs, stripe_mock, mailpit)
    group = f"runonce-exec-email-{uuid.uuid4().hex[:6]}"
    start_group_at_end(broker.bootstrap_servers(), group)
    executor = RunonceProcess(broker, f"exec-email-{mailpit.tls}", ["executor", "--vendor", "email", "--group", group],
                              logs, {"RUNONCE_CONNECTORS": str(path), **env})
    executor.start()
    results = ResultWatcher(broker.bootstrap_servers())
    incident = incidents()[0]
    recipient = str(incident.requests[0].params["to"])
    try:
        with Submitter(broker.bootstrap_servers(), agent_id="outreach-agent") as sub:
            ids = [sub.submit(r.tool, r.params, idempotency_key=r.idempotency_key) for r in incident.requests]
        decided = decision_log.wait(ids, timeout_s=120)
        approved = [a for a, d in decided.items() if d["outcome"] == "APPROVED"]
        deadline = time.monotonic() + 90
        finals = [results.wait(a, deadline) for a in approved]
    finally:
        results.close()
        executor.stop()
    assert [f["status"] for f in finals] == ["succeeded"], (finals, executor.log_tail())
    assert mailpit.received_by().get(recipient) == 1, mailpit.received_by()


def test_an_executor_sigkilled_during_a_burst_sends_no_second_message(
        broker: Settings, mailpit: Mailpit, stripe_mock: StripeMock, logs: Path) -> None:
    """200 emails to 200 recipients, paced at 40/s, the executor SIGKILLed once Mailpit has 20:
    its successor finds their intents without results and sends none again (SMTP cannot be
    asked: in_doubt). No recipient has two messages, and every action has a final result."""
    bootstrap = broker.bootstrap_servers()
    source = own_approved_topic(bootstrap)
    SOURCES.append(source)
    path, env = connectors_file(logs, stripe_mock, mailpit)
    run = uuid.uuid4().hex[:6]
    requests = approve_all(bootstrap, source, [
        ("send_email", {"to": f"lead-{run}-{i}@prospect.example", "subject": "Quick intro", "body": f"#{i}"},
         f"{run}-{i}") for i in range(200)])
    argv = ["executor", "--vendor", "email", "--source-topic", source, "--group", f"g-{run}"]
    env = {"RUNONCE_CONNECTORS": str(path), "RUNONCE_VENDOR_LIMITS": "email:per_s=40",
           "RUNONCE_EXECUTOR_SESSION_TIMEOUT_MS": "6000", **env}
    doomed = RunonceProcess(broker, f"exec-burst-{mailpit.tls}", argv, logs, env)
    doomed.start()
    deadline = time.monotonic() + 60
    while sum(1 for who in mailpit.received_by() if run in who) < 20:
        assert time.monotonic() < deadline and doomed.alive(), doomed.log_tail()
        time.sleep(0.05)
    doomed.kill()
    successor = RunonceProcess(broker, f"exec-burst-{mailpit.tls}-2", argv, logs, env)
    successor.start()
    results = ResultWatcher(bootstrap)
    try:
        deadline = time.monotonic() + 120
        finals = {r["action_id"]: results.wait(r["action_id"], deadline)["status"] for r in requests}
    finally:
        results.close()
        successor.stop()
    received = {who: n for who, n in mailpit.received_by().items() if run in who}
    assert received and max(received.values()) == 1, {w: n for w, n in received.items() if n > 1}
    assert set(finals.values()) <= {"succeeded", "in_doubt"} and len(finals) == 200
    # the kill landed mid-burst: some intents were found without results and reconciled
    assert "in_doubt" in finals.values(), (finals, successor.log_tail())
    assert sum(1 for s in finals.values() if s == "succeeded") <= len(received)


def test_a_connector_of_your_own_runs_in_runonce_executor(broker: Settings, sandboxes: LocalVendors,
                                                          logs: Path) -> None:
    """tests/connector_plugin's kind, installed as a package: ``runonce executor --vendor
    followups`` performs its action once, and a second action with the same key is never sent."""
    bootstrap = broker.bootstrap_servers()
    source = own_approved_topic(bootstrap)
    SOURCES.append(source)
    path = logs / "connectors-followups.toml"
    path.write_text(f'[vendors.followups]\nkind = "followup-email"\nbase_url = "{sandboxes.http_url}"\n'
                    f'api_key = {{ file = "{sandboxes.email_api_key_file}" }}\nsender = "sales@example.com"\n')
    key = f"followup-{uuid.uuid4().hex[:6]}"
    params = {"recipient": "john@prospect.example", "subject": "Following up", "body": "Hi John"}
    first, repeat = approve_all(bootstrap, source, [("send_followup_email", params, key)] * 2)
    executor = RunonceProcess(broker, "exec-followups", ["executor", "--vendor", "followups", "--source-topic",
                                                          source, "--group", f"g-{key}"], logs,
                              {"RUNONCE_CONNECTORS": str(path)})
    executor.start()
    results = ResultWatcher(bootstrap)
    try:
        deadline = time.monotonic() + 60
        done = [results.wait(r["action_id"], deadline) for r in (first, repeat)]
    finally:
        results.close()
        executor.stop()
    assert done[0]["status"] == "succeeded" and done[1]["vendor_ref"] == done[0]["vendor_ref"], done
    assert "duplicate of action" in done[1]["error"], done[1]
    assert sandboxes.ledger.count("emails", key) == 1 and len(sandboxes.ledger.requests("/emails", key)) == 1


def test_connectors_check_probes_each_vendor_and_a_refused_password_names_no_secret(
        mailpit: Mailpit, stripe_mock: StripeMock, logs: Path, tmp_path: Path) -> None:
    path, env = connectors_file(tmp_path, stripe_mock, mailpit)
    ok = _cli(["connectors", "check", "--probe", "--file", str(path)], env, logs / f"check-{mailpit.tls}.out")
    assert ok.returncode == 0, ok.stdout
    assert "payments: kind stripe" in ok.stdout and "probe: ok, GET /v1/balance answered 200" in ok.stdout
    assert "email: kind smtp" in ok.stdout and f"{mailpit.tls} TLS, AUTH as" in ok.stdout, ok.stdout
    wrong = _cli(["connectors", "check", "--probe", "--file", str(path)],
                 {**env, "RUNONCE_TEST_SMTP_PASSWORD": WRONG_PASSWORD}, logs / f"check-wrong-{mailpit.tls}.out")
    assert wrong.returncode == 1 and "email:" in wrong.stdout and "probe: FAILED" in wrong.stdout, wrong.stdout


def _cli(argv: list[str], env: dict[str, str], out: Path) -> subprocess.CompletedProcess[str]:
    import os

    done = child.run(argv, {**os.environ, **env}, 60)
    out.write_text(done.stdout + done.stderr)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout + done.stderr, "")


def test_no_planted_secret_reached_a_log_a_topic_or_a_printed_line(broker: Settings, logs: Path) -> None:
    """Runs last in the module: every log and printed line of the tests above, and every record
    (value and headers) of every runonce topic."""
    texts = {p.name: p.read_bytes() for p in logs.rglob("*") if p.is_file() and not p.name.endswith(".toml")}
    assert any(name.startswith("exec-") for name in texts) and any(name.startswith("check-") for name in texts)
    for topic in [spec.name for spec in topics.TOPICS] + SOURCES:
        for record in read_all(broker.bootstrap_servers(), topic):
            texts[f"{topic}@{record.partition}:{record.offset}"] = b"".join(
                [record.value or b"", record.key or b"", *(v or b"" for _, v in record.headers)])
    for secret in PLANTED:
        leaked = [where for where, text in texts.items() if secret.encode() in text]
        assert not leaked, f"a planted secret is in {leaked[:5]}"
