"""`runonce export` on the real broker: a time range of decisions to Parquet and JSON lines,
read back with pyarrow and queried with DuckDB (the analyst queries of docs/analysts.md)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from runonce.ops.export import export
from runonce.ops.tail import Filter
from runonce.sdk.submit import build_request
from runonce.settings import Settings
from runonce.wire.codec import Codec

pytestmark = pytest.mark.broker

#: the analyst queries docs/analysts.md shows, run here against the exported file
QUERIES = {
    "drops by reason per hour": """
        SELECT date_trunc('hour', broker_time) AS hour, reason, count(*) AS drops
        FROM 'FILE' WHERE decision = 'DROPPED' GROUP BY ALL ORDER BY hour, drops DESC""",
    "top agents by repeats": """
        SELECT agent, count(*) AS repeats FROM 'FILE'
        WHERE repeats_action_id IS NOT NULL GROUP BY agent ORDER BY repeats DESC LIMIT 10""",
    "actions stopped by budgets": """
        SELECT tool, matched AS scope, count(*) AS stopped, min(broker_time) AS first, max(broker_time) AS last
        FROM 'FILE' WHERE reason = 'budget_exhausted' GROUP BY ALL ORDER BY stopped DESC""",
}


def _private_topic(broker: Settings) -> str:
    """A topic of this test's own: records planted in runonce's topics would be accounted by the
    oracle of every later test in the session (as decisions of requests that never were)."""
    name = f"test.export.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers()})
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(30)
    return name


def _decision(tool: str, agent: str, reason: str, i: int) -> dict:
    request = build_request(tool, {"service": "api", "i": i}, agent_id=agent, idempotency_key=None)
    return {"request": request, "outcome": "DROPPED", "reason": reason, "dedup_key": "",
            "unkeyed": True, "content_hash": "0" * 64, "matched_key": f"{tool}:service=api",
            "first_action_id": str(uuid.uuid4()), "first_partition": 1, "first_offset": i,
            "window_ms": 1_200_000, "event_time_ms": request["requested_at_ms"], "source_partition": 0,
            "source_offset": i}


def test_a_time_range_of_drops_to_parquet_and_jsonl_queried_with_duckdb(broker: Settings, tmp_path: Path) -> None:
    tool = f"restart_probe_{uuid.uuid4().hex[:6]}"
    topic = _private_topic(broker)
    codec = Codec()
    since_ms = int(time.time() * 1000) - 1000
    p = Producer({"bootstrap.servers": broker.bootstrap_servers()})
    planted = [("agent-a", "budget_exhausted")] * 42 + [("agent-b", "content_window")] * 3
    for i, (agent, reason) in enumerate(planted):
        p.produce(topic, key=tool.encode(), value=codec.encode("ActionDecision", _decision(tool, agent, reason, i)))
    assert p.flush(30) == 0
    keep = Filter(tool=tool)
    parquet = tmp_path / "drops.parquet"
    said: list[str] = []
    assert export(broker.kafka_access(), "dropped", parquet, keep=keep, since_ms=since_ms, topic=topic,
                  progress=said.append) == 45
    assert said and said[-1].startswith("exported 45 records to")
    table = pq.read_table(parquet)
    assert table.num_rows == 45 and table.schema.field("broker_time").type.tz == "UTC"
    assert set(table.column("reason").to_pylist()) == {"budget_exhausted", "content_window"}

    lines = tmp_path / "drops.jsonl"
    assert export(broker.kafka_access(), "dropped", lines, keep=keep, since_ms=since_ms, topic=topic) == 45
    first = json.loads(lines.read_text().splitlines()[0])
    assert first["tool"] == tool and first["repeats_action_id"] and first["kind"] == "decision"

    db = duckdb.connect()
    results = {name: db.execute(sql.replace("FILE", str(parquet))).fetchall() for name, sql in QUERIES.items()}
    assert sum(n for _, _, n in results["drops by reason per hour"]) == 45
    assert results["top agents by repeats"][0] == ("agent-a", 42)
    (budget,) = results["actions stopped by budgets"]
    assert budget[:3] == (tool, f"{tool}:service=api", 42)


def test_dead_letters_and_unreadable_records_are_exported_not_skipped(broker: Settings, tmp_path: Path) -> None:
    dlq, dropped = _private_topic(broker), _private_topic(broker)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers()})
    p.produce(dlq, key=b"k", value=b"\x00garbage", headers=[("runonce.error.type", b"decode_error"),
                                                           ("runonce.error.message", b"not Avro")])
    p.produce(dropped, key=b"k", value=b"not avro")  # a foreign writer's record among the decisions
    assert p.flush(30) == 0
    out = tmp_path / "dlq.parquet"
    assert export(broker.kafka_access(), "dlq", out, topic=dlq) == 1
    assert {"kind": "dead_letter", "error_type": "decode_error", "error": "not Avro"}.items() <= \
        pq.read_table(out).to_pylist()[0].items()
    out = tmp_path / "drops.parquet"
    assert export(broker.kafka_access(), "dropped", out, topic=dropped) == 1
    (unreadable,) = pq.read_table(out).to_pylist()
    assert unreadable["kind"] == "unreadable" and unreadable["error"] and unreadable["offset"] == 0
