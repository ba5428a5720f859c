"""The seed's restart loop (47 restarts of one service: 5 approved, then budget_exhausted) as
operators and analysts see it. A real Prometheus (Debian's package, runonce/ops/observe)
scrapes a real stream worker and a real executor on the session's broker: runonce's budget
alert must be *firing* in Prometheus' own alerts API, an undecodable record must raise the
dead-letter alert, and every panel of the Grafana dashboard must return series. Then
`runonce report` writes its page for the range, and Debian's headless Chromium opens it: a
screenshot that is not blank, and the numbers in the DOM Chromium built equal the oracle's."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import Producer

from runonce.audit.oracle import verify
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.devbroker.broker import free_ports
from runonce.kafka import groups, topics
from runonce.ops.export import rows
from runonce.ops.observe.prometheus import DASHBOARD, Prometheus, Target, packaged
from runonce.ops.report.build import write_report
from runonce.ops.report.page import PALETTE
from runonce.ops.scenarios import incidents
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from tests.support.browser import PageCounts, dump_dom, screenshot
from tests.support.png import colours
from tests.support.worker import RunonceProcess, WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow]


@pytest.fixture(scope="module")
def observed(broker: Settings, sandboxes: LocalVendors,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A worker and the ops-webhook executor serving metrics, and a Prometheus scraping both every second."""
    logs = tmp_path_factory.mktemp("observe-logs")
    worker_port, executor_port = free_ports(2)
    group = f"runonce-exec-observe-{uuid.uuid4().hex[:6]}"
    groups.start_group_at_end(broker.bootstrap_servers(), group, topics.APPROVED)
    procs = [
        WorkerProcess(broker, "observe-w0", logs, extra_env={"RUNONCE_METRICS_PORT": str(worker_port)}),
        RunonceProcess(broker, "observe-exec-webhook",
                       ["executor", "--vendor", "webhook", "--group", group, "--metrics-port", str(executor_port)],
                       logs, sandboxes.env()),
    ]
    prometheus = Prometheus(broker.with_(home=tmp_path_factory.mktemp("observe-home")))
    try:
        for proc in procs:
            proc.start()
        prometheus.start([Target("runonce-worker", (f"127.0.0.1:{worker_port}",)),
                          Target("runonce-executor", (f"127.0.0.1:{executor_port}",))], scrape_interval_s=1)
        deadline = time.monotonic() + 90
        while {s["metric"]["job"] for s in prometheus.query("up == 1")} != {"runonce-worker", "runonce-executor"}:
            assert time.monotonic() < deadline, "\n".join(f"--- {p.name}\n{p.log_tail()}" for p in procs)
            time.sleep(0.5)
        yield prometheus
    finally:
        prometheus.stop()
        for proc in procs:
            proc.stop()


def _wait_firing(prometheus: Prometheus, alertname: str, timeout_s: float = 60.0, **labels: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        for alert in prometheus.firing():
            if alert["labels"]["alertname"] == alertname and labels.items() <= alert["labels"].items():
                return alert
        assert time.monotonic() < deadline, f"{alertname} {labels} never fired; alerts: {prometheus.api('alerts')}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def replayed(observed: Prometheus, broker: Settings) -> dict[str, Any]:
    """The restart loop replayed, and one undecodable record: what the alerts and panels show."""
    assert not observed.firing(), observed.firing()  # nothing fires before the incident
    loop = next(i for i in incidents() if i.name == "restart_loop")
    since_ms = int(time.time() * 1000)  # the broker's clock: this module's records carry later times
    ids: list[str] = []
    sixth_at = 0.0
    with Submitter(broker.bootstrap_servers(), agent_id="ops-agent") as sub:
        for n, request in enumerate(loop.requests, start=1):
            ids.append(sub.submit(request.tool, request.params, idempotency_key=request.idempotency_key))
            sub.flush()
            if n == 6:  # the first restart past the budget of 5
                sixth_at = time.monotonic()
            time.sleep(0.1)  # a crashing container, restarted as fast as the agent can
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers()})
    producer.produce(topics.REQUESTED, key=b"observe", value=b"\x00 not an action")
    assert producer.flush(10) == 0
    return {"ids": ids, "sixth_at": sixth_at, "since_ms": since_ms}


def test_the_restart_loop_fires_the_budget_alert(observed: Prometheus, replayed: dict[str, Any],
                                                 decision_log: DecisionWatcher) -> None:
    alert = _wait_firing(observed, "RunonceBudgetExhausted", tool="restart_service")
    fired_after_s = time.monotonic() - replayed["sixth_at"]
    decided = decision_log.wait(replayed["ids"], timeout_s=60)
    assert sum(d["reason"] == "budget_exhausted" for d in decided.values()) == 42
    assert alert["labels"]["severity"] == "page"
    assert "restart_service" in alert["annotations"]["description"]
    print(f"\nbudget alert firing {fired_after_s:.1f} s after the 6th restart (scrape and evaluation every 1 s)")


def test_an_undecodable_record_fires_the_dead_letter_alert(observed: Prometheus, replayed: dict[str, Any]) -> None:
    alert = _wait_firing(observed, "RunonceDeadLettersGrowing")
    assert alert["labels"]["severity"] == "ticket" and alert["labels"]["kind"]


def test_every_dashboard_panel_returns_series(observed: Prometheus, replayed: dict[str, Any],
                                              decision_log: DecisionWatcher) -> None:
    decision_log.wait(replayed["ids"], timeout_s=60)
    panels = json.loads(packaged(DASHBOARD))["panels"]
    empty = []
    deadline = time.monotonic() + 30  # lag arrives with the clients' statistics (every 5 s)
    while True:
        empty = [(p["title"], t["expr"]) for p in panels for t in p["targets"] if not observed.query(t["expr"])]
        if not empty or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert not empty, empty
    assert len(panels) >= 10


def test_the_report_page_in_chromium_shows_the_oracles_numbers(observed: Prometheus, replayed: dict[str, Any],
                                                                 broker: Settings, decision_log: DecisionWatcher,
                                                                 tmp_path: Path) -> None:
    bootstrap = broker.bootstrap_servers()
    decision_log.wait(replayed["ids"], timeout_s=60)
    _wait_firing(observed, "RunonceDeadLettersGrowing")  # the dead letter is written too
    since_ms, until_ms = replayed["since_ms"], int(time.time() * 1000) + 1000
    page = tmp_path / "report.html"
    write_report(bootstrap, page, since_ms, until_ms, source="the test's broker")

    # The oracle for the same range: every action requested in it, and how it was decided.
    requested = {r["action_id"] for r in rows(bootstrap, "requested", since_ms=since_ms, until_ms=until_ms)
                 if r.get("kind") == "request"}
    oracle = verify(bootstrap)
    outcomes = Counter(oracle.outcome_by_action[a] for a in requested)
    assert requested == set(replayed["ids"]) and sum(outcomes.values()) == 47

    dom = dump_dom(page)
    shown = PageCounts(dom)
    assert shown.scripts == 0
    assert shown.counts["decided"] == sum(outcomes.values())
    assert shown.counts["approved"] == sum(n for (o, _r), n in outcomes.items() if o == "APPROVED") == 5
    assert shown.counts["dropped"] == sum(n for (o, _r), n in outcomes.items() if o == "DROPPED")
    assert shown.counts["budget_exhausted"] == outcomes[("DROPPED", "budget_exhausted")] == 42
    assert shown.counts["drops_by_reason:budget_exhausted"] == 42
    assert shown.counts["dead_letters"] == 1 and shown.counts["dead_letters_by_type:decode_error"] == 1
    assert shown.counts["in_doubt"] == 0
    budgets = {k: v for k, v in shown.counts.items() if k.startswith("budget:restart_service:")}
    assert list(budgets.values()) == [42], budgets  # one scope: the service the loop restarted

    image = colours(screenshot(page, tmp_path / "report.png"))
    total = sum(image.values())
    not_white = total - image[b"\xff\xff\xff"]
    palette = [c for c in PALETTE if image[bytes.fromhex(c[1:])] > 50]
    assert not_white > total // 100, f"a blank page: {not_white} of {total} pixels not white"
    assert palette, "no chart bar drawn in the palette's colours"
