"""Every decision reason, against the real broker and a real stream worker process."""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from runonce.audit.oracle import verify
from runonce.kafka import clients, topics
from runonce.kafka.partitioner import partition_for
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import Submitter, build_request
from runonce.settings import Settings
from runonce.wire.codec import MAGIC, Codec
from runonce.wire.headers import H_ALERT, H_ERROR_MESSAGE, H_ERROR_TYPE, H_ORIGIN_TOPIC
from tests.support.worker import WorkerProcess

pytestmark = pytest.mark.broker


@pytest.fixture()
def sub(broker: Settings) -> Any:
    with Submitter(broker.bootstrap_servers(), agent_id="it") as s:
        yield s


def uid() -> str:
    return uuid.uuid4().hex[:10]


def submit_all(sub: Submitter, items: list[tuple[str, dict[str, Any], str | None]]) -> list[str]:
    ids = [sub.submit(tool, params, idempotency_key=key) for tool, params, key in items]
    sub.flush()
    return ids


def test_keys_duplicates_and_mismatches(stream_worker: WorkerProcess, decision_log: DecisionWatcher,
                                        sub: Submitter) -> None:
    k = f"key-{uid()}"
    email = {"to": f"{uid()}@x.com", "body": "hello"}
    ids = submit_all(sub, [("send_email", email, k), ("send_email", email, k),
                           ("send_email", {**email, "body": "changed"}, k)])
    d = decision_log.wait(ids)
    assert [d[i]["reason"] for i in ids] == ["unique", "duplicate_key", "key_payload_mismatch"]
    assert d[ids[0]]["outcome"] == "APPROVED"
    for dropped in ids[1:]:
        assert d[dropped]["first_action_id"] == ids[0] and d[dropped]["matched_key"] == k
        assert d[dropped]["first_offset"] == d[ids[0]]["source_offset"]
        assert d[dropped]["window_ms"] == 24 * 3_600_000


def test_missing_key_denied_tool_and_unkeyed_content_key(stream_worker: WorkerProcess, decision_log: DecisionWatcher,
                                                         sub: Submitter) -> None:
    to = f"{uid()}@x.com"
    ids = submit_all(sub, [("charge_payment", {"amount": 100}, None),
                           ("execute_database_write", {"sql": "DELETE FROM users"}, f"k-{uid()}"),
                           ("send_email", {"to": to, "body": "b"}, None),
                           ("send_email", {"body": "b", "to": to}, None)])  # same content, other key order
    d = decision_log.wait(ids)
    assert [(d[i]["outcome"], d[i]["reason"]) for i in ids[:2]] == [("DROPPED", "missing_key"),
                                                                   ("DROPPED", "tool_denied")]
    # Unkeyed records are keyed by action id, so they may arrive on other partitions and be
    # re-keyed: either may come first, but exactly one is approved and the other repeats it.
    winner, loser = sorted(ids[2:], key=lambda i: d[i]["outcome"])
    assert (d[winner]["outcome"], d[winner]["reason"]) == ("APPROVED", "unique")
    assert (d[loser]["outcome"], d[loser]["reason"]) == ("DROPPED", "duplicate_key")
    assert d[loser]["first_action_id"] == winner
    assert d[winner]["unkeyed"] and d[winner]["dedup_key"].startswith("content:")


def test_scope_rules_natural_id_content_window_audit_and_budget(stream_worker: WorkerProcess,
                                                                decision_log: DecisionWatcher, sub: Submitter) -> None:
    r = uid()
    jira = {"project": "SUP", "customer_id": f"c-{r}", "description": "SSO broken"}
    email = {"to": f"{r}@x.com", "body": "same"}
    slack = {"channel": f"#{r}", "text": "alert"}
    items: list[tuple[str, dict[str, Any], str | None]] = [
        ("create_jira_ticket", jira, f"j1-{r}"), ("create_jira_ticket", jira, f"j2-{r}"),
        ("send_email", email, f"e1-{r}"), ("send_email", email, f"e2-{r}"),
        ("post_slack_message", slack, None), ("post_slack_message", slack, None),
    ] + [("restart_service", {"service": f"svc-{r}"}, None)] * 7
    ids = submit_all(sub, items)
    d = decision_log.wait(ids)
    # Pairs with different keys pass stage 1 on different partitions, so either may reach
    # stage 2 first: one is approved, the other repeats it.
    for first, second, reason, outcome in ((0, 1, "natural_id_taken", "DROPPED"), (2, 3, "content_window", "DROPPED"),
                                           (4, 5, "content_window_audit", "APPROVED")):
        pair = {ids[first], ids[second]}
        repeat = next(i for i in pair if d[i]["reason"] == reason)
        original = (pair - {repeat}).pop()
        assert (d[original]["outcome"], d[original]["reason"]) == ("APPROVED", "unique")
        assert d[repeat]["outcome"] == outcome and d[repeat]["first_action_id"] == original
    restarts = [(d[i]["outcome"], d[i]["reason"]) for i in ids[6:]]
    assert restarts.count(("APPROVED", "unique")) == 5 and restarts.count(("DROPPED", "budget_exhausted")) == 2
    jira_repeat = next(i for i in ids[:2] if d[i]["reason"] == "natural_id_taken")
    assert d[jira_repeat]["matched_key"].startswith("create_jira_ticket:nid=")
    email_repeat = next(i for i in ids[2:4] if d[i]["reason"] == "content_window")
    assert d[email_repeat]["matched_key"] == f"send_email:to={r}@x.com"
    budget_drop = next(i for i in ids[6:] if d[i]["reason"] == "budget_exhausted")
    assert decision_log.headers_by_action[budget_drop][0][H_ALERT] == b"budget_exhausted"


def test_wrongly_keyed_records_are_rekeyed_and_windows_use_broker_time(broker: Settings, stream_worker: WorkerProcess,
                                                                       decision_log: DecisionWatcher) -> None:
    codec = Codec()
    k = f"rk-{uid()}"
    producer = Producer(clients.producer_config(broker.bootstrap_servers()))
    first = build_request("update_salesforce_field", {"id": 1, "field": "stage"}, agent_id="it", idempotency_key=k)
    second = build_request("update_salesforce_field", {"id": 1, "field": "stage"}, agent_id="it", idempotency_key=k)
    right = partition_for(k, broker.partitions)
    # Both on the wrong partition, and with an agent clock a year in the past.
    skewed_ms = int(time.time() * 1000) - 365 * 24 * 3_600_000
    for record in (first, second):
        producer.produce(topics.REQUESTED, value=codec.encode("ActionRequested", record),
                         partition=(right + 1) % broker.partitions, timestamp=skewed_ms)
    producer.flush(10)
    d = decision_log.wait([first["action_id"], second["action_id"]])
    assert d[first["action_id"]]["reason"] == "unique"
    assert d[second["action_id"]]["reason"] == "duplicate_key"
    assert d[second["action_id"]]["first_partition"] == (right + 1) % broker.partitions  # where it arrived
    # LogAppendTime: the event time is the broker's, not the skewed producer's.
    assert abs(d[first["action_id"]]["event_time_ms"] - time.time() * 1000) < 120_000


def test_bad_input_lands_in_the_dead_letter_topic_with_reason_and_origin(broker: Settings,
                                                                        stream_worker: WorkerProcess,
                                                                        decision_log: DecisionWatcher) -> None:
    codec = Codec()
    producer = Producer(clients.producer_config(broker.bootstrap_servers()))
    delivered: dict[int, tuple[int, int]] = {}
    invalid = build_request("send_email", {"subject": "no recipient"}, agent_id="it", idempotency_key=f"x-{uid()}")
    bad = [b"plain text, not avro", MAGIC + struct.pack("<Q", 99) + b"\x02",
           codec.encode("ActionRequested", invalid)]
    for i, value in enumerate(bad):
        producer.produce(topics.REQUESTED, key=f"bad-{uid()}".encode(), value=value,
                         on_delivery=lambda err, msg, i=i: delivered.__setitem__(i, (msg.partition(), msg.offset())))
    producer.flush(10)
    kinds = [decision_log.wait_dead(delivered[i]) for i in range(len(bad))]
    assert [k[H_ERROR_TYPE] for k in kinds] == ["decode_error", "unknown_schema", "invalid_action"]
    assert "needs params field 'to'" in kinds[2][H_ERROR_MESSAGE]
    assert all(k[H_ORIGIN_TOPIC] == topics.REQUESTED for k in kinds)


def test_a_client_loaded_with_other_policies_than_the_worker_is_warned_once(
        broker: Settings, stream_worker: WorkerProcess, tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Each decision carries the digest of the policies that decided it; a client (the gateway's,
    an agent's) that loaded others warns, once. Catches the header dropped from decisions or the
    comparison gone: a gateway serving a policy file the worker never read, in silence."""
    import logging

    from runonce.core.policy import PolicyBook
    from runonce.sdk.client import ActionClient

    other = tmp_path / "policies.toml"
    other.write_text('[tools.open_ticket]\nkey = "require"\n')
    for policies, warned in ((PolicyBook.load(), False), (PolicyBook.load(other), True)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="runonce.sdk"), \
                ActionClient(broker.bootstrap_servers(), agent_id="policies-probe", policies=policies) as client:
            for _ in range(2):
                outcome = client.submit("execute_database_write", {"sql": f"-- {uuid.uuid4().hex}"}).result(60)
                assert outcome.drop_reason == "tool_denied", outcome
        said = [r.getMessage() for r in caplog.records if "other policies" in r.getMessage()]
        assert len(said) == (1 if warned else 0), said
        if warned:
            assert policies.digest in said[0] and PolicyBook.load().digest in said[0], said


def test_the_oracle_accounts_for_every_record_of_the_module(broker: Settings, stream_worker: WorkerProcess,
                                                            module_since_ms: int) -> None:
    deadline = time.monotonic() + 60
    report = verify(broker.bootstrap_servers(), since_ms=module_since_ms)
    while report.lost and time.monotonic() < deadline:
        time.sleep(1)
        report = verify(broker.bootstrap_servers(), since_ms=module_since_ms)
    assert report.ok, report.summary()
    assert report.requested == report.accounted and report.requested > 0


@pytest.mark.parametrize("compression", ["lz4", "zstd", "snappy", "gzip"])
def test_compressed_batches_from_agents_are_decided(broker: Settings, stream_worker: WorkerProcess,
                                                    decision_log: DecisionWatcher, compression: str) -> None:
    """Agents may compress; faust's client needs codecs for that (a missing one crashed the worker)."""
    codec = Codec()
    producer = Producer(clients.producer_config(broker.bootstrap_servers(), **{"compression.type": compression}))
    records = [build_request("update_salesforce_field", {"record_id": uid(), "field": "f", "value": i},
                             agent_id="it", idempotency_key=f"{compression}-{uid()}") for i in range(20)]
    for r in records:
        producer.produce(topics.REQUESTED, key=r["idempotency_key"].encode(), value=codec.encode("ActionRequested", r))
    producer.flush(10)
    d = decision_log.wait([r["action_id"] for r in records])
    assert {x["reason"] for x in d.values()} == {"unique"}
    assert stream_worker.alive()


def test_a_burst_submitted_at_once_is_decided_in_order_and_a_bad_call_publishes_none(
        broker: Settings, stream_worker: WorkerProcess, decision_log: DecisionWatcher) -> None:
    """``ActionClient.submit_many``: one wait for every delivery, the handles in the calls'
    order. Catches handles out of order (the repeat's handle would hold the first decision),
    and a call checked only as the batch is sent (the calls before the bad one published:
    the later submit of the same key would be a repeat)."""
    from runonce.errors import InvalidAction
    from runonce.sdk.client import ActionClient, Call

    first, later = f"burst-{uid()}", f"burst-{uid()}"
    email, other = {"to": f"{uid()}@x.com", "body": "hello"}, {"to": f"{uid()}@x.com", "body": "other"}
    with ActionClient(broker.bootstrap_servers(), agent_id="it") as client:
        with pytest.raises(InvalidAction, match=r"call 1 \(send_email\).*'to'"):
            client.submit_many([Call("send_email", other, later), Call("send_email", {"body": "no one"}, f"k-{uid()}")])
        calls = [Call("send_email", email, first), Call("send_email", email, first),
                 *(Call("update_salesforce_field", {"record_id": uid(), "field": "f", "value": i}, f"sf-{uid()}")
                   for i in range(30)),
                 Call("send_email", other, later)]
        handles = client.submit_many(calls)
    assert len(handles) == len(calls) and all(h.requested_at is not None for h in handles)
    d = decision_log.wait([h.action_id for h in handles])
    reasons = [d[h.action_id]["reason"] for h in handles]
    assert reasons[:2] == ["unique", "duplicate_key"] and d[handles[1].action_id]["first_action_id"] == handles[0].action_id
    assert reasons[2:] == ["unique"] * 31, reasons  # the key the refused batch held was never published
