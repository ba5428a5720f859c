"""A kill storm on executors writing to a real PostgreSQL: 2,000 approved refund records, with
repeats an executor meets (a decision approved twice, a second action with an order's key),
and the executor SIGKILLed once at each point of its protocol: before the statement, after the
statement and its marker and before their COMMIT, after that COMMIT and before the Kafka commit,
after the Kafka commit, and after a Kafka commit and before the results index on disk learned of
it (each restart opens the same index folder). Then, counted on the user's own table: one row per order, every
action with a final result, none in doubt."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runonce.connectors.vendors.sandbox.local_postgres import LocalPostgres
from runonce.kafka import clients, topics
from runonce.kafka.partitioner import partition_for
from runonce.kafka.reader import read_all
from runonce.sdk.submit import build_request
from runonce.settings import Settings
from runonce.streams.records import output_key
from runonce.testkit.decisions import approved_decision
from runonce.wire.codec import Codec
from tests.integration.test_executor import FAST_TAKEOVER, own_approved_topic
from tests.support.worker import RunonceProcess

pytestmark = pytest.mark.broker

ORDERS = 1_600
DOUBLED = 200  # decisions written twice (a zombie stream worker's)
SAME_KEY = 200  # a second action id with an order's idempotency key
#: each process dies at one point, at the pass given; the last one finishes the work
KILLS = ("before_call:2", "before_vendor_commit:40", "after_call:2", "after_commit:2", "before_index_write:3")
SQL = "INSERT INTO refunds (order_id, amount_cents) VALUES (%(order_id)s, %(amount_cents)s) RETURNING id"


def publish(bootstrap: str, topic: str, run: str) -> list[dict[str, Any]]:
    """The 2,000 records, in order: each order's first action; then, among them, the repeats."""
    codec = Codec()
    producer = clients.producer(bootstrap)
    firsts = [approved_decision(build_request("issue_refund", {"order_id": f"{run}-{i}", "amount_cents": 100 + i},
                                     agent_id="refunds", idempotency_key=f"refund-{run}-{i}"), f"refund-{run}-{i}")
              for i in range(ORDERS)]
    seconds = [approved_decision(build_request("issue_refund", {"order_id": f"{run}-{i}", "amount_cents": 100 + i},
                                      agent_id="refunds", idempotency_key=f"refund-{run}-{i}"), f"refund-{run}-{i}")
               for i in range(ORDERS - SAME_KEY, ORDERS)]
    records = firsts[:ORDERS // 2] + firsts[:DOUBLED] + firsts[ORDERS // 2:] + seconds
    for d in records:
        k = output_key(d)
        producer.produce(topic, key=k, value=codec.encode("ActionDecision", d), partition=partition_for(k, 6))
    assert producer.flush(30) == 0
    assert len(records) == 2_000
    return [d["request"] for d in firsts + seconds]


def test_a_kill_storm_on_database_executors_leaves_one_row_per_order_and_nothing_in_doubt(
        broker: Settings, postgres: LocalPostgres, tmp_path: Path) -> None:
    with psycopg.connect(postgres.dsn, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS refunds; DROP TABLE IF EXISTS runonce_actions")
        db.execute("CREATE TABLE refunds (id bigserial PRIMARY KEY, order_id text NOT NULL, amount_cents integer)")
    bootstrap = broker.bootstrap_servers()
    source = own_approved_topic(bootstrap)
    run = uuid.uuid4().hex[:6]
    requests = publish(bootstrap, source, run)
    connectors = tmp_path / "connectors.toml"
    connectors.write_text(f'[vendors.orders_db]\nkind = "postgres"\ndsn = {{ env = "ORDERS_DSN" }}\n'
                          f'[vendors.orders_db.tools.issue_refund]\nsql = "{SQL}"\n')
    env = {"RUNONCE_CONNECTORS": str(connectors), "ORDERS_DSN": postgres.dsn, **FAST_TAKEOVER,
           "RUNONCE_EXECUTOR_MAX_BATCH": "200"}
    argv = ["executor", "--vendor", "orders_db", "--source-topic", source, "--group", f"g-refunds-{run}"]
    for point in KILLS:
        doomed = RunonceProcess(broker, f"exec-db-{point.replace(':', '-')}", argv, tmp_path,
                                {**env, "RUNONCE_EXECUTOR_FAILPOINT": point})
        doomed.start()
        assert doomed.wait_exit(120) == -9, f"{point} never fired:\n{doomed.log_tail()}"  # the fault applied

    last = RunonceProcess(broker, "exec-db-last", argv, tmp_path, env)
    last.start()
    codec = Codec()
    ours = {r["action_id"] for r in requests}
    final: dict[str, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + 180
        while len(final) < len(ours) and time.monotonic() < deadline:
            for rec in read_all(bootstrap, topics.RESULTS):
                _, r = codec.decode(rec.value, expect="ActionResult")
                if r["action_id"] in ours and r["status"] != "attempting":
                    final[r["action_id"]] = r
            time.sleep(1)
    finally:
        last.stop()
    assert len(final) == len(ours), f"{len(ours) - len(final)} actions without a final result:\n{last.log_tail()}"
    statuses = {r["status"] for r in final.values()}
    assert statuses == {"succeeded"}, (statuses, last.log_tail())  # 0 in doubt, 0 failed
    with psycopg.connect(postgres.dsn) as db:
        per_order = dict(db.execute("SELECT order_id, count(*) FROM refunds GROUP BY order_id").fetchall())
        ids = dict(db.execute("SELECT order_id, id::text FROM refunds").fetchall())
    assert per_order == {f"{run}-{i}": 1 for i in range(ORDERS)}  # one row per approved order, none twice
    for request in requests:  # every action's answer is its order's row
        assert final[request["action_id"]]["vendor_ref"] == ids[json.loads(request["params_json"])["order_id"]]
    # The DSN is a secret: its password never reaches an executor's log, whatever it went through.
    logs = [p.read_text(errors="replace") for p in tmp_path.glob("*.log")]
    assert len(logs) == len(KILLS) + 1 and not any(postgres.password in text for text in logs)
