"""The ``postgres`` kind against a real PostgreSQL (Debian's, started by the test session): the
operator's statement and its marker commit together or not at all. Every count is read from
the user's own table with ``SELECT count(*)``, never from runonce's answers."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

import psycopg
import pytest

from runonce.connectors.executor import registry
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall, Capability
from runonce.connectors.toolkit.errors import PermanentVendorError
from runonce.connectors.vendors.postgres import PostgresConnector
from runonce.connectors.vendors.sandbox.local_postgres import LocalPostgres
from runonce.errors import ConfigError
from runonce.wire.results import Status
from tests.support.commit_cut import CommitCut

REFUND_SQL = ("INSERT INTO refunds (order_id, amount_cents) VALUES (%(order_id)s, %(amount_cents)s) "
              "RETURNING id")
FAST = RetryPolicy(base_backoff_s=0.01, max_backoff_s=0.05)


def connectors_toml(table: str = "refunds", extra: str = "") -> str:
    return (f'[vendors.orders_db]\nkind = "postgres"\ndsn = {{ env = "ORDERS_DSN" }}\n{extra}'
            f'[vendors.orders_db.tools.issue_refund]\nsql = "{REFUND_SQL.replace("refunds", table)}"\n')


def build(tmp_path: Path, dsn: str, text: str | None = None) -> PostgresConnector:
    path = tmp_path / f"connectors-{uuid.uuid4().hex[:6]}.toml"
    path.write_text(text or connectors_toml())
    connector = registry.vendor(path, {"ORDERS_DSN": dsn}, "orders_db").connector
    assert isinstance(connector, PostgresConnector)
    return connector


@pytest.fixture()
def db(postgres: LocalPostgres) -> Iterator[psycopg.Connection]:
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS refunds; DROP TABLE IF EXISTS runonce_actions")
        conn.execute("CREATE TABLE refunds (id bigserial PRIMARY KEY, order_id text NOT NULL, "
                     "amount_cents integer NOT NULL CHECK (amount_cents > 0))")
        yield conn


def refund(order_id: str, action_id: str | None = None, key: str | None = None, amount: int = 500) -> ActionCall:
    action_id = action_id or uuid.uuid4().hex
    return ActionCall(action_id, "issue_refund", {"order_id": order_id, "amount_cents": amount}, key or action_id)


def rows(db: psycopg.Connection, order_id: str) -> int:
    found = db.execute("SELECT count(*) FROM refunds WHERE order_id = %s", (order_id,)).fetchone()
    assert found is not None
    return int(found[0])


def test_the_refund_and_its_marker_commit_together_and_a_repeat_finds_the_marker(
        tmp_path: Path, postgres: LocalPostgres, db: psycopg.Connection) -> None:
    """The seed's refund, retried 5 times by its agent and then by a second action with the
    same key: one row. The same five inserts without runonce: five rows."""
    connector = build(tmp_path, postgres.dsn)
    assert connector.capability is Capability.ATOMIC
    call = refund("order-1")
    answers = [connector.perform(call) for _ in range(5)]
    twin = connector.perform(refund("order-1", key=call.vendor_key))  # another action, the same key
    assert rows(db, "order-1") == 1
    assert {a.vendor_ref for a in answers} == {twin.vendor_ref} and answers[0].vendor_ref.isdigit()
    assert "found its marker" in answers[1].detail and call.action_id in twin.detail
    for _ in range(5):  # what an agent's five retries do to the table without runonce
        db.execute(REFUND_SQL, {"order_id": "order-1-bare", "amount_cents": 500})
    assert rows(db, "order-1-bare") == 5


def test_two_workers_racing_on_one_action_leave_one_row(tmp_path: Path, postgres: LocalPostgres,
                                                        db: psycopg.Connection) -> None:
    """A zombie and the partition's new owner perform one action at once. The first holds its
    transaction open before COMMIT; the second's marker waits on the first's key, fails when it
    commits, and rolls its own statement back: one row, one answer."""
    first, second = build(tmp_path, postgres.dsn), build(tmp_path, postgres.dsn)
    for connector in (first, second):  # connected, the marker table made: nothing but the key orders them
        connector.perform(refund(f"order-warm-up-{uuid.uuid4().hex[:4]}"))
    call = refund("order-race")
    inside = threading.Event()
    waited: list[bool] = []

    def hold(_: ActionCall) -> None:
        """Commit only once the second is seen waiting on a lock (the marker's key): the race
        is then the one the test names, however slow the machine."""
        inside.set()
        with psycopg.connect(postgres.dsn, autocommit=True) as watch:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not waited:
                row = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()
                if row and row[0]:
                    waited.append(True)
                time.sleep(0.05)

    first = first.hooked(hold)
    answers: list[str] = []
    t = threading.Thread(target=lambda: answers.append(first.perform(call).vendor_ref))
    t.start()
    assert inside.wait(10)
    answers.append(second.perform(call).vendor_ref)
    t.join(10)
    assert waited, "the second never waited on the first's marker: no race happened"
    assert rows(db, "order-race") == 1
    assert len(answers) == 2 and answers[0] == answers[1]


@pytest.mark.parametrize("cut", ["before", "after"])
def test_a_connection_lost_during_commit_is_resolved_by_the_marker(tmp_path: Path, postgres: LocalPostgres,
                                                                   db: psycopg.Connection, cut: str) -> None:
    """The connection dies at COMMIT, before the server had it (rolled back) or after (committed,
    the client never told). Either way the runner performs again, the marker decides, and the
    action ends succeeded with one row: never failed, never in doubt, never two."""
    proxy = CommitCut(postgres.port)
    try:
        connector = build(tmp_path, postgres.dsn.replace(f"port={postgres.port}", f"port={proxy.port}"))
        connector.perform(refund("order-warm-up"))  # its first connection creates the marker table
        call = refund(f"order-cut-{cut}")
        proxy.arm(cut)
        result = ActionRunner(connector, FAST).perform(call)
    finally:
        proxy.close()
    assert proxy.cuts == 1  # the fault applied
    assert (result.status, rows(db, call.params["order_id"])) == (Status.SUCCEEDED, 1), result
    marker = db.execute("SELECT vendor_ref FROM runonce_actions WHERE action_id = %s", (call.action_id,)).fetchone()
    assert marker is not None and result.vendor_ref == marker[0]
    assert result.attempts == 2


def test_a_commit_whose_answer_is_lost_on_the_last_attempt_is_in_doubt_never_failed(
        tmp_path: Path, postgres: LocalPostgres, db: psycopg.Connection) -> None:
    """The server committed the row and the connection died before it said so, with no attempt
    left to find the marker: the action is in_doubt (one row exists). Catches a connection lost
    during COMMIT classified as "not performed" (TransientVendorError): the action would end
    failed with its row committed."""
    proxy = CommitCut(postgres.port)
    try:
        connector = build(tmp_path, postgres.dsn.replace(f"port={postgres.port}", f"port={proxy.port}"))
        connector.perform(refund("order-warm-up-last"))
        call = refund("order-cut-last")
        proxy.arm("after")
        result = ActionRunner(connector, RetryPolicy(max_attempts=1)).perform(call)
    finally:
        proxy.close()
    assert proxy.cuts == 1  # the fault applied
    assert (result.status, rows(db, "order-cut-last")) == (Status.IN_DOUBT, 1), result
    assert "COMMIT" in (result.error or ""), result


def test_a_parameter_missing_or_unknown_or_a_violated_constraint_is_failed_with_no_row(
        tmp_path: Path, postgres: LocalPostgres, db: psycopg.Connection) -> None:
    connector = build(tmp_path, postgres.dsn)
    runner = ActionRunner(connector, FAST)
    missing = ActionCall("a-missing", "issue_refund", {"order_id": "order-bad"}, "k-missing")
    unknown = ActionCall("a-unknown", "issue_refund", {"order_id": "order-bad", "amount_cents": 5,
                                                       "sql": "DROP TABLE refunds"}, "k-unknown")
    negative = refund("order-bad", amount=-5)
    outcomes = {c.action_id: runner.perform(c) for c in (missing, unknown, negative)}
    assert all(r.status is Status.FAILED and r.attempts == 1 for r in outcomes.values()), outcomes
    assert "missing amount_cents" in (outcomes["a-missing"].error or "")
    assert "unknown sql" in (outcomes["a-unknown"].error or "")
    assert "refunds_amount_cents_check" in (outcomes[negative.action_id].error or "")
    assert rows(db, "order-bad") == 0
    assert db.execute("SELECT count(*) FROM runonce_actions").fetchone() == (0,)  # a failure leaves no marker
    with pytest.raises(PermanentVendorError):  # the agent cannot name another statement
        connector.perform(ActionCall("a-other", "drop_everything", {}, "k-other"))


def test_markers_older_than_the_window_are_pruned(tmp_path: Path, postgres: LocalPostgres,
                                                  db: psycopg.Connection) -> None:
    connector = build(tmp_path, postgres.dsn)
    old, recent = refund("order-old"), refund("order-recent")
    connector.perform(old)
    connector.perform(recent)
    db.execute("UPDATE runonce_actions SET done_at = now() - interval '25 hours' WHERE action_id = %s",
               (old.action_id,))
    assert connector.prune(24 * 3600 * 1000) == 1
    left = db.execute("SELECT action_id FROM runonce_actions").fetchall()
    assert left == [(recent.action_id,)]


@pytest.mark.parametrize("text, error", [
    (connectors_toml().replace("%(amount_cents)s", "%s"), "named parameters only"),
    (connectors_toml(extra='marker_table = "x; drop"\n'), "marker_table: must be a table name"),
    (connectors_toml().replace("sql =", "sqll ="), "tools.issue_refund.sqll: unknown field"),
    ('[vendors.orders_db]\nkind = "postgres"\ndsn = { env = "ORDERS_DSN" }\n', "declares each tool"),
    ('[vendors.pay]\nkind = "stripe"\napi_key = { env = "ORDERS_DSN" }\n[vendors.pay.tools.charge_payment]\nsql = "x"\n',
     "vendors.pay.tools: unknown field"),
])
def test_a_wrong_connectors_file_is_refused_naming_the_field(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=error.replace("(", r"\(").replace(")", r"\)")):
        registry.load(path, {"ORDERS_DSN": "host=127.0.0.1 dbname=x"})


def test_a_database_off_this_machine_needs_verified_tls(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(connectors_toml())
    with pytest.raises(ConfigError, match="sslmode=verify-full"):
        registry.load(path, {"ORDERS_DSN": "postgresql://app@db.internal.example/orders?sslmode=require"})
    registry.load(path, {"ORDERS_DSN": "postgresql://app@db.internal.example/orders?sslmode=verify-full"})
