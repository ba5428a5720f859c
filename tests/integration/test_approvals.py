"""Human approval on the real broker: a stream worker (the default runtime) whose policy holds
charges above 500.00, the payments executor against the sandbox, and approvers as separate
processes, as the CLI's client, and as two headless Chromium sessions on the approvals page.

Each test counts the released decisions on actions.approved (the hold stage's promise:
released once) and the requests the payments sandbox received for the charge's key (every
request, though the vendor itself would deduplicate a repeated key)."""

from __future__ import annotations

import multiprocessing as mp
import re
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from runonce import tokens
from runonce.approvals.client import Approvals
from runonce.approvals.page import ApprovalsPage
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.core.approval import Verdict
from runonce.core.policy import PolicyBook
from runonce.errors import ResultTimeout
from runonce.kafka import groups, topics
from runonce.kafka.partitioner import partition_for
from runonce.kafka.reader import read_all
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.client import ActionClient
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from runonce.wire.codec import Codec
from tests.support.cdp import BrowserSession
from tests.support.load import final_results
from tests.support.worker import RunonceProcess, WorkerProcess

pytestmark = pytest.mark.broker

BIG = 75_000  # above the policy's 50_000: held


def _policy_file(path: Path) -> Path:
    """The shipped policies, with charges above 500.00 held for an hour and wire transfers
    always held for 3 s (the expiry test)."""
    text = (Path(__file__).resolve().parents[2] / "runonce/core/policies.toml").read_text()
    shipped = 'approval = { above = { amount_cents = 1000000 }, expires = "24h" }'
    assert shipped in text
    text = text.replace(shipped, 'approval = { above = { amount_cents = 50000 }, expires = "1h" }', 1)
    text += '\n[tools.wire_transfer]\nkey = "require"\napproval = { always = true, expires = "3s" }\n'
    PolicyBook.from_toml(text)  # valid, or the worker would not start
    path.write_text(text)
    return path


class Stack:
    def __init__(self, broker: Settings, vendors: VendorServer, worker: WorkerProcess, decisions: DecisionWatcher) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap_servers()
        self.vendors = vendors
        self.worker = worker
        self.decisions = decisions

    def charge(self, key: str, cents: int = BIG) -> str:
        with Submitter(self.bootstrap, agent_id="approvals-it") as sub:
            action_id = sub.submit("charge_payment", {"card": "tok_visa", "amount_cents": cents}, idempotency_key=key)
        held = self.decisions.wait([action_id], timeout_s=60)[action_id]
        assert held["outcome"] == "HELD", held
        return action_id

    def approved(self, action_id: str) -> list[dict[str, Any]]:
        """Every decision for the action on actions.approved (read_committed)."""
        codec = Codec()
        found = [codec.decode(r.value, expect="ActionDecision")[1] for r in read_all(self.bootstrap, topics.APPROVED)]
        return [d for d in found if d["request"]["action_id"] == action_id]

    def charge_requests(self, key: str) -> int:
        return len(self.vendors.ledger.requests("/v1/charges", key))

    def performed(self, action_id: str, timeout_s: float = 60) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = final_results(self.bootstrap, {action_id}).get(action_id)
            if status not in (None, "attempting"):
                return status
            time.sleep(0.3)
        raise AssertionError(f"{action_id} was never performed")


@pytest.fixture(scope="module")
def stack(broker: Settings, decision_log: DecisionWatcher, sandboxes: LocalVendors,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    vendors = sandboxes.vendors
    logs = tmp_path_factory.mktemp("approvals")
    env = {"RUNONCE_POLICY_FILE": str(_policy_file(logs / "policies.toml"))}
    worker = WorkerProcess(broker, "appr-w", logs, extra_env=env)
    group = f"runonce-exec-appr-{uuid.uuid4().hex[:6]}"
    groups.start_group_at_end(broker.bootstrap_servers(), group, topics.APPROVED)  # earlier tests' are not ours
    executor = RunonceProcess(broker, "appr-exec", ["executor", "--vendor", "payments", "--group", group], logs,
                              {**env, **sandboxes.env()})
    worker.start()
    executor.start()
    try:
        yield Stack(broker, vendors, worker, decision_log)
    finally:
        executor.stop()
        worker.stop()


def _approver(bootstrap: str, name: str, action_id: str, barrier: Any, out: Any) -> None:
    with Approvals(bootstrap, name) as approvals:
        barrier.wait(30)  # every approver past its setup: now all click at once
        seen = approvals.verdict(action_id, Verdict.APPROVE, wait_s=60)
        out.put((name, seen.change, seen.note))


def test_approvers_racing_in_four_processes_release_one_charge(stack: Stack) -> None:
    key = f"appr-race-{uuid.uuid4().hex[:6]}"
    action_id = stack.charge(key)
    assert stack.approved(action_id) == [] and stack.charge_requests(key) == 0  # held: not performed
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_approver, args=(stack.bootstrap, f"approver-{i}", action_id, barrier, out))
             for i in range(4)]
    for p in procs:
        p.start()
    answers = sorted(out.get(timeout=90) for _ in procs)
    for p in procs:
        p.join(30)
    released = [name for name, change, _ in answers if change == "release"]
    assert len(released) == 1, answers
    assert all(note == f"already released by {released[0]}" for _, change, note in answers if change == "none"), answers
    assert stack.performed(action_id) == "succeeded"
    approvals = stack.approved(action_id)
    assert [d["verdict_by"] for d in approvals] == released, approvals
    assert stack.charge_requests(key) == 1


def test_an_agents_handle_says_held_then_resolves_and_a_retry_gets_the_same_answer(stack: Stack) -> None:
    key = f"appr-sdk-{uuid.uuid4().hex[:6]}"
    with ActionClient(stack.bootstrap, agent_id="sdk-agent") as client:
        handle = client.submit("charge_payment", {"card": "tok_visa", "amount_cents": BIG}, idempotency_key=key)
        deadline = time.monotonic() + 60  # undecided until the worker takes it (a busy machine: seconds)
        while True:
            with pytest.raises(ResultTimeout) as waited:
                handle.result(timeout=2)
            if "not decided yet" not in str(waited.value) or time.monotonic() > deadline:
                break
        assert re.search(r"waiting for approval \(amount_cents 75000 > 50000\)", str(waited.value)), waited.value
        assert handle.held is not None and handle.held.why == "amount_cents 75000 > 50000"
        retry = client.submit("charge_payment", {"card": "tok_visa", "amount_cents": BIG}, idempotency_key=key)
        with Approvals(stack.bootstrap, "gina") as gina:
            assert gina.verdict(handle.action_id, Verdict.APPROVE).change == "release"
        first, again = handle.result(timeout=60), retry.result(timeout=60)
    assert first.status == "succeeded" and handle.held is None
    assert (again.status, again.result_of, again.vendor_ref) == ("succeeded", handle.action_id, first.vendor_ref)
    assert stack.charge_requests(key) == 1


def test_a_denied_charge_is_dropped_with_its_reason_and_never_performed(stack: Stack) -> None:
    key = f"appr-deny-{uuid.uuid4().hex[:6]}"
    action_id = stack.charge(key)
    with Approvals(stack.bootstrap, "carol") as approvals:
        assert approvals.verdict(action_id, Verdict.DENY, "not this customer").change == "deny"
        late = approvals.verdict(action_id, Verdict.APPROVE)
    assert (late.change, late.note) == ("none", "already denied by carol")
    dropped = stack.decisions.wait([action_id], final=True)[action_id]
    assert (dropped["outcome"], dropped["reason"], dropped["verdict_by"]) == ("DROPPED", "approval_denied", "carol")
    assert stack.approved(action_id) == [] and stack.charge_requests(key) == 0


def test_a_hold_no_one_approves_expires_on_event_time_with_its_reason(stack: Stack) -> None:
    key = f"appr-expire-{uuid.uuid4().hex[:6]}"
    with Submitter(stack.bootstrap, agent_id="approvals-it") as sub:
        action_id = sub.submit("wire_transfer", {"to": "acct-1", "amount_cents": 10}, idempotency_key=key)
        assert stack.decisions.wait([action_id])[action_id]["outcome"] == "HELD"
        time.sleep(3.5)
        # Event time moves on the hold's partition when the worker decides anything there.
        partition = partition_for(key, stack.broker.partitions)
        tick = next(k for k in (f"tick-{key}-{i}" for i in range(10_000))
                    if partition_for(k, stack.broker.partitions) == partition)
        sub.submit("update_salesforce_field", {"record_id": tick, "field": "f", "value": 1}, idempotency_key=tick)
    expired = stack.decisions.wait([action_id], timeout_s=30, final=True)[action_id]
    assert (expired["outcome"], expired["reason"], expired["verdict_by"]) == ("DROPPED", "approval_expired", "expiry")


def test_a_worker_killed_between_hold_and_release_releases_exactly_once(stack: Stack) -> None:
    key = f"appr-kill-{uuid.uuid4().hex[:6]}"
    action_id = stack.charge(key)
    stack.worker.kill()
    shutil.rmtree(stack.broker.state_dir / stack.worker.name, ignore_errors=True)  # restored from the changelog
    with Approvals(stack.bootstrap, "dana") as dana, Approvals(stack.bootstrap, "erin") as erin:
        sent = [dana.send(action_id, Verdict.APPROVE), erin.send(action_id, Verdict.APPROVE)]  # while no one decides
    stack.worker.start()
    assert stack.performed(action_id, timeout_s=120) == "succeeded", stack.worker.log_tail()
    with Approvals(stack.bootstrap, "frank") as frank:
        seen = {v.verdict_id: v for v in frank.get(action_id).verdicts}
    assert [seen[v].change for v in sent] == ["release", "none"], seen
    assert [d["verdict_by"] for d in stack.approved(action_id)] == ["dana"]
    assert stack.charge_requests(key) == 1


def test_two_people_approving_on_the_page_at_once_release_once_and_both_see_who(stack: Stack, tmp_path) -> None:
    tokens_file = tmp_path / "approvers.tokens"
    links = {name: tokens.add(tokens_file, name) for name in ("alice", "bob")}
    key = f"appr-page-{uuid.uuid4().hex[:6]}"
    action_id = stack.charge(key)
    page = ApprovalsPage(Approvals(stack.bootstrap, "page"), tokens_file)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    sessions = {name: BrowserSession() for name in links}
    row = f'tr[data-action="{action_id}"]'
    try:
        for name, session in sessions.items():
            session.open(f"{page.url}/?token={links[name]}")
            assert session.evaluate("document.querySelector('[data-approver]').textContent") == name
            assert session.evaluate(f"document.querySelector('{row}').dataset.status") == "held"
        clicks = [threading.Thread(target=s.evaluate, args=(f"document.querySelector('{row} button[value=approve]')"
                                                             ".click()",)) for s in sessions.values()]
        for t in clicks:
            t.start()
        for t in clicks:
            t.join(30)
        flashes = {}
        for name, session in sessions.items():
            deadline = time.monotonic() + 60
            while "msg=" not in (session.evaluate("location.href") or "") or \
                    session.evaluate("document.readyState") != "complete":
                assert time.monotonic() < deadline, f"{name}'s verdict never came back"
                time.sleep(0.1)
            flashes[name] = session.evaluate("document.querySelector('[data-flash]').textContent")
        winner = next(name for name, text in flashes.items() if text == "approve: release by you")
        other = next(name for name in sessions if name != winner)
        assert flashes[other] == f"approve: changed nothing (already released by {winner})", flashes
        for session in sessions.values():  # both pages, read again, say who released it
            session.open(page.url)
            assert session.evaluate(f"document.querySelector('{row}').dataset.status") == "released"
            assert session.evaluate(f"document.querySelector('{row} [data-decided-by]').textContent") == winner
    finally:
        for session in sessions.values():
            session.close()
        page.close()
    assert stack.performed(action_id) == "succeeded"
    assert [d["verdict_by"] for d in stack.approved(action_id)] == [winner]
    assert stack.charge_requests(key) == 1


def test_its_agent_cancels_a_held_charge_through_the_sdk_and_no_other_agent_can(stack: Stack) -> None:
    """``ActionClient.cancel`` (what MCP's tasks/cancel calls) from a client that did not submit
    the action (a restarted agent: it reads the held record back from Kafka). Another agent's
    cancel is written (the SDK cannot know) and changes nothing; its own agent's drops it, and a
    person's approve after that performs nothing. Catches the stream job's agent check dropped
    (the intruder's cancel denies the charge), a cancel read back from the wrong partition
    (never decided: the handle times out), and a cancel that a later approve overrides."""
    key = f"appr-cancel-{uuid.uuid4().hex[:6]}"
    with ActionClient(stack.bootstrap, agent_id="approvals-it") as agent:
        handle = agent.submit("charge_payment", {"card": "tok_visa", "amount_cents": BIG}, idempotency_key=key)
        assert handle.requested_at is not None
        stack.decisions.wait([handle.action_id], timeout_s=60)
    with Approvals(stack.bootstrap, "lena") as lena, ActionClient(stack.bootstrap, agent_id="intruder") as intruder:
        assert intruder.cancel(handle.action_id, handle.requested_at, time.monotonic() + 30)  # written
        deadline = time.monotonic() + 60
        while not lena.get(handle.action_id).verdicts and time.monotonic() < deadline:
            time.sleep(0.3)
        refused = lena.get(handle.action_id).verdicts
        assert [(v.approver, v.change) for v in refused] == [("agent:intruder", "none")], refused
        with ActionClient(stack.bootstrap, agent_id="approvals-it") as again:  # the agent, restarted
            assert again.cancel(handle.action_id, handle.requested_at, time.monotonic() + 30, reason="gave up")
            retry = again.submit("charge_payment", {"card": "tok_visa", "amount_cents": BIG}, idempotency_key=key)
            outcome = retry.result(timeout=60)
        assert outcome.cancelled and outcome.verdict_by == "agent:approvals-it", outcome
        late = lena.verdict(handle.action_id, Verdict.APPROVE)
    assert (late.change, late.note) == ("none", "already denied by agent:approvals-it")
    dropped = stack.decisions.wait([handle.action_id], final=True)[handle.action_id]
    assert (dropped["reason"], dropped["verdict_by"]) == ("approval_denied", "agent:approvals-it")
    assert stack.approved(handle.action_id) == [] and stack.charge_requests(key) == 0


def test_the_faust_runtime_holds_and_releases_once_too(stack: Stack) -> None:
    """Last in the module: the transactional worker hands the group to a faust one (the same
    policy file), which restores the holds table the other wrote and holds new actions itself."""
    stack.worker.stop()
    faust = WorkerProcess(stack.broker, "appr-faust", stack.worker.log_path.parent, extra_env=stack.worker.extra_env,
                          runtime="faust")
    faust.start()
    try:
        key = f"appr-faust-{uuid.uuid4().hex[:6]}"
        action_id = stack.charge(key)  # held by faust
        barrier = threading.Barrier(2)
        changes: list[str] = []

        def approve(name: str) -> None:
            with Approvals(stack.bootstrap, name) as approvals:
                barrier.wait(30)
                changes.append(approvals.verdict(action_id, Verdict.APPROVE, wait_s=90).change)

        threads = [threading.Thread(target=approve, args=(name,)) for name in ("hana", "ivan")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert sorted(changes) == ["none", "release"], (changes, faust.log_tail())
        assert stack.performed(action_id) == "succeeded"
        # at-least-once: a release may be written again after a redelivery, never by another approver
        assert len({d["verdict_by"] for d in stack.approved(action_id)}) == 1 and stack.charge_requests(key) == 1
        # and its agent's cancel (faust reads actions.cancels too)
        given_up = f"appr-faust-cancel-{uuid.uuid4().hex[:6]}"
        with ActionClient(stack.bootstrap, agent_id="approvals-it") as agent:
            handle = agent.submit("charge_payment", {"card": "tok_visa", "amount_cents": BIG}, idempotency_key=given_up)
            assert handle.requested_at is not None
            stack.decisions.wait([handle.action_id], timeout_s=60)
            assert agent.cancel(handle.action_id, handle.requested_at, time.monotonic() + 30)
            assert handle.result(timeout=60).cancelled, faust.log_tail()
        assert stack.charge_requests(given_up) == 0
    finally:
        faust.stop()
