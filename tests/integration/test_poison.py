"""The poison suite: every kind of bad record lands in actions.dlq with its origin and the
error in headers, the worker goes on deciding, and the oracle's counts reconcile.

Not poison, on purpose: a record without a Kafka key whose payload is a valid action is
decided like any other (the payload carries the keys; the job re-keys it), and headers an
agent sets are ignored, never trusted as origin."""

from __future__ import annotations

import json
import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from runonce.audit.oracle import verify
from runonce.kafka import clients, topics
from runonce.kafka.partitioner import partition_for
from runonce.kafka.reader import read_all
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import build_request
from runonce.settings import Settings
from runonce.wire.codec import MAGIC, Codec
from runonce.wire.headers import (
    H_ERROR_MESSAGE,
    H_ERROR_TYPE,
    H_ORIGIN_OFFSET,
    H_ORIGIN_PARTITION,
    H_ORIGIN_TIMESTAMP,
    H_ORIGIN_TOPIC,
)
from tests.support.worker import WorkerProcess

pytestmark = pytest.mark.broker

MB = 1024 * 1024


def uid() -> str:
    return uuid.uuid4().hex[:10]


def _request(tool: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return build_request(tool, params, agent_id="poison", idempotency_key=kw.pop("key", f"p-{uid()}"), **kw)


def _produce(broker: Settings, records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Produce raw records (value/key/headers as given); return where each landed."""
    producer = Producer(clients.producer_config(broker.bootstrap_servers(), **{"message.max.bytes": 10 * MB}))
    landed: dict[int, tuple[int, int]] = {}
    errors: list[Any] = []

    def report(i: int) -> Any:
        return lambda err, msg: errors.append(err) if err else landed.__setitem__(i, (msg.partition(), msg.offset()))

    for i, r in enumerate(records):
        producer.produce(r.get("topic", topics.REQUESTED), value=r["value"], key=r.get("key"),
                         headers=r.get("headers"), partition=r.get("partition", -1), on_delivery=report(i))
    assert producer.flush(30) == 0 and not errors, errors
    return [landed[i] for i in range(len(records))]


def test_each_kind_of_poison_is_dead_lettered_with_its_reason_and_origin(
        broker: Settings, stream_worker: WorkerProcess, decision_log: DecisionWatcher) -> None:
    codec = Codec()
    avro = lambda r: codec.encode("ActionRequested", r)  # noqa: E731
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        # (name, record, error type, a phrase of the message)
        ("not avro", {"value": b"plain text, not avro"}, "decode_error", ""),
        ("unknown fingerprint", {"value": MAGIC + struct.pack("<Q", 99) + b"\x02"}, "unknown_schema", ""),
        ("truncated avro", {"value": avro(_request("send_email", {"to": "a@x"}))[:20]}, "decode_error", ""),
        ("null value", {"value": None, "key": b"k"}, "decode_error", ""),
        ("empty tool", {"value": avro(_request("", {"to": "a@x"}))}, "invalid_action", "tool"),
        ("params too large", {"value": avro(_request("send_email", {"to": "a@x", "body": "x" * 300_000}))},
         "invalid_action", "params_json"),
        ("natural id without a rule",
         {"value": avro(_request("send_email", {"to": "a@x"}, natural_id="n-1"))}, "invalid_action", "natural_id"),
        ("missing key, invalid action", {"value": avro(_request("send_email", {"subject": "s"})), "key": None},
         "invalid_action", "'to'"),
        ("several MB of junk", {"value": b"\x00" * (5 * MB)}, "decode_error", ""),
        ("several MB of params", {"value": avro(_request("send_email", {"to": "a@x", "body": "y" * (4 * MB)}))},
         "invalid_action", "params_json"),
        ("spoofed origin headers", {"value": b"junk", "headers": [
            (H_ORIGIN_TOPIC, b"actions.approved"), (H_ORIGIN_PARTITION, b"not-a-number"),
            (H_ORIGIN_OFFSET, b"\xff\xfe"), ("runonce.error.type", b"forged")]}, "decode_error", ""),
        ("malformed headers", {"value": b"junk", "headers": [("", b""), ("x", None), ("bin", bytes(range(256))),
                                                             *[(f"h{i}", b"v") for i in range(200)]]},
         "decode_error", ""),
    ]
    positions = _produce(broker, [c[1] for c in cases])
    for (name, record, kind, phrase), pos in zip(cases, positions):
        dead = decision_log.wait_dead(pos, timeout_s=90)
        assert dead[H_ERROR_TYPE] == kind, (name, dead)
        assert phrase in dead[H_ERROR_MESSAGE], (name, dead[H_ERROR_MESSAGE])
        # The origin is where the record really was, whatever headers the agent sent.
        assert (dead[H_ORIGIN_TOPIC], int(dead[H_ORIGIN_PARTITION]), int(dead[H_ORIGIN_OFFSET])) == \
            (topics.REQUESTED, *pos), name
    # The dead letter keeps the record whole, several MB included: nothing is truncated away.
    big = positions[[c[0] for c in cases].index("several MB of junk")]
    copies = [r for r in read_all(broker.bootstrap_servers(), topics.DLQ)
              if (r.header(H_ORIGIN_PARTITION), r.header(H_ORIGIN_OFFSET)) ==
              (str(big[0]).encode(), str(big[1]).encode())]
    assert len(copies) == 1 and copies[0].value == b"\x00" * (5 * MB)
    assert stream_worker.alive()


def _hostile(codec: Codec) -> list[tuple[str, bytes, str]]:
    """Schema-valid records that once stopped a worker (a crash loop, an abort loop), or passed
    as valid: (name, Avro value, a phrase of the dead letter's reason naming the field)."""
    nested = '{"to": "a@x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}"
    avro = lambda r: codec.encode("ActionRequested", r)  # noqa: E731
    raw = lambda tool, params_json, **kw: {**_request(tool, {}, **kw), "params_json": params_json}  # noqa: E731
    return [
        ("JSON nested 100,000 deep", avro(raw("send_email", nested)), "nested deeper than"),
        ("a 2 MB agent id", avro({**_request("send_email", {"to": f"{uid()}@x"}), "agent_id": "a" * (2 * MB)}),
         "agent_id"),
        ("a 1 MB tool name", avro(_request("t" * MB, {"to": "a@x"})), "tool"),
        ("a 1.5 MB natural id", avro(_request("create_jira_ticket", {"project": "P", "customer_id": "c"},
                                              natural_id="n" * (3 * MB // 2))), "natural_id"),
        ("a null recipient", avro(_request("send_email", {"to": None})), "'to'"),
        ("a list of recipients", avro(_request("send_email", {"to": ["a@x", "b@x"]})), "'to'"),
        ("NaN", avro(raw("charge_payment", '{"card": "tok", "amount_cents": NaN}')), "NaN"),
        ("two recipients under one key", avro(raw("send_email", '{"to": "a@x", "to": "b@x"}')), "duplicate key"),
    ]


def test_hostile_records_never_stop_the_partition(broker: Settings, stream_worker: WorkerProcess,
                                                  decision_log: DecisionWatcher) -> None:
    """Each hostile record on partition 0, then a good action on partition 0: every hostile one is
    dead-lettered with its field named, the worker never exits, and the good action is decided."""
    codec = Codec()
    cases = _hostile(codec)
    good = _request("update_salesforce_field", {"record_id": uid(), "field": "stage"})
    positions = _produce(broker, [{"value": value, "partition": 0} for _, value, _ in cases]
                         + [{"value": codec.encode("ActionRequested", good), "partition": 0}])
    for (name, _, phrase), pos in zip(cases, positions):
        dead = decision_log.wait_dead(pos, timeout_s=90)
        assert dead[H_ERROR_TYPE] == "invalid_action", (name, dead)
        assert phrase in dead[H_ERROR_MESSAGE], (name, dead[H_ERROR_MESSAGE][:300])
    produced_at = time.monotonic()
    decided = decision_log.wait([good["action_id"]], timeout_s=90)[good["action_id"]]
    print(f"\n{stream_worker.name}: the good action after {len(cases)} hostile records decided "
          f"{time.monotonic() - produced_at:.2f} s after their dead letters")
    assert (decided["outcome"], decided["reason"]) == ("APPROVED", "unique")
    assert stream_worker.alive(), stream_worker.log_tail()


def test_valid_actions_around_poison_are_decided(broker: Settings, stream_worker: WorkerProcess,
                                                 decision_log: DecisionWatcher) -> None:
    """A Kafka record without a key, or with junk headers, is still an action: decided, not dead-lettered."""
    codec = Codec()
    key = f"nokey-{uid()}"
    first = _request("update_salesforce_field", {"record_id": uid(), "field": "stage"}, key=key)
    again = _request("update_salesforce_field", json.loads(first["params_json"]), key=key)
    headed = _request("update_salesforce_field", {"record_id": uid(), "field": "stage"})
    _produce(broker, [
        {"value": codec.encode("ActionRequested", first), "key": None},
        {"value": codec.encode("ActionRequested", again), "key": None},
        {"value": codec.encode("ActionRequested", headed), "key": headed["idempotency_key"].encode(),
         "headers": [(H_ORIGIN_PARTITION, b"abc"), ("x", None), ("bin", b"\xff")]},
    ])
    d = decision_log.wait([first["action_id"], again["action_id"], headed["action_id"]], timeout_s=90)
    # Keyless records land on any partition, so which of the two comes first is not defined; one does.
    assert sorted(d[a["action_id"]]["reason"] for a in (first, again)) == ["duplicate_key", "unique"]
    assert d[headed["action_id"]]["reason"] == "unique"


def test_a_foreign_record_with_malformed_headers_on_the_rekey_topic(broker: Settings, stream_worker: WorkerProcess,
                                                                     decision_log: DecisionWatcher) -> None:
    """Only the job writes its re-key topic; a record there with unreadable origin headers is
    dead-lettered under the re-key topic's own coordinates (so no requested record is misattributed)."""
    codec = Codec()
    request = _request("update_salesforce_field", {"record_id": uid(), "field": "f"})
    key = request["idempotency_key"].encode()
    [(part, off)] = _produce(broker, [{
        "topic": topics.REKEY, "key": key, "value": codec.encode("ActionRequested", request),
        "partition": partition_for(key, broker.partitions),
        "headers": [(H_ORIGIN_TOPIC, topics.REQUESTED.encode()), (H_ORIGIN_PARTITION, b"zero"),
                    (H_ORIGIN_OFFSET, b"1"), (H_ORIGIN_TIMESTAMP, b"1")]}])
    deadline = time.monotonic() + 60
    found: list[Any] = []
    while not found and time.monotonic() < deadline:
        found = [r for r in read_all(broker.bootstrap_servers(), topics.DLQ)
                 if r.header(H_ORIGIN_TOPIC) == topics.REKEY.encode()
                 and r.header(H_ORIGIN_OFFSET) == str(off).encode()
                 and r.header(H_ORIGIN_PARTITION) == str(part).encode()]
        time.sleep(0.5)
    assert len(found) == 1, "the foreign record was not dead-lettered"
    assert found[0].header(H_ERROR_TYPE) == b"decode_error"
    assert b"runonce.origin.partition" in (found[0].header(H_ERROR_MESSAGE) or b"")
    assert stream_worker.alive()


def test_the_counts_reconcile(broker: Settings, stream_worker: WorkerProcess, module_since_ms: int) -> None:
    deadline = time.monotonic() + 60
    report = verify(broker.bootstrap_servers(), since_ms=module_since_ms)
    while not report.ok and time.monotonic() < deadline:
        time.sleep(1)
        report = verify(broker.bootstrap_servers(), since_ms=module_since_ms)
    assert report.ok, report.summary()
    assert report.dead_lettered >= 12
