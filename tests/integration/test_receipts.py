"""Receipts on the real broker: a worker with a key writes one receipt for each decision in the
decision's transaction, chained per partition and signed at each transaction's end; the
chains verify offline with only the public key, and every decision has exactly one receipt."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from runonce.audit.receipts import Selection, certify, decision_hashes, export, read_receipts
from runonce.kafka import topics
from runonce.kafka.reader import read_all
from runonce.ops.audit_cli import verify_file
from runonce.ops.watch import DecisionWatcher
from runonce.receipts.signing import Signer, public_key_pem
from runonce.receipts.verify import Verdict, verify
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from runonce.wire.codec import Codec
from tests.support.worker import WorkerProcess


def test_every_decision_has_one_receipt_and_the_chains_verify_offline(
        broker: Settings, receipts_key: Path, decision_log: DecisionWatcher, tmp_path: Path,
        module_since_ms: int, capsys: pytest.CaptureFixture[str]) -> None:
    run = uuid.uuid4().hex[:8]
    worker = WorkerProcess(broker, f"receipts-{run}", tmp_path, extra_env={"RUNONCE_RECEIPTS_KEY": str(receipts_key)})
    worker.start()
    try:
        with Submitter(broker.bootstrap_servers(), agent_id="billing") as sub:
            ids = [sub.submit("charge_payment", {"amount_cents": 100 + i % 40, "customer": f"c-{i % 40}"},
                              idempotency_key=f"{run}-{i % 40}") for i in range(60)]  # 20 repeats
            ids += [sub.submit("send_email", {"to": f"lead-{i % 5}@example.com", "body": f"hi {run}"},
                               idempotency_key=None) for i in range(10)]  # 5 repeats in their window
            ids.append(sub.submit("send_email", {"to": "all@example.com", "body": run,
                                                 "bcc": [f"b{i}@example.com" for i in range(11)]}))  # held
        with Submitter(broker.bootstrap_servers(), agent_id="billing", tenant=f"acme-{run}") as sub:
            theirs = [sub.submit("charge_payment", {"amount_cents": 7, "customer": f"c-{i}"},
                                 idempotency_key=f"{run}-acme-{i}") for i in range(5)]
        ids += theirs
        decision_log.wait(ids, timeout_s=120)
    finally:
        worker.stop()
    log = read_receipts(broker.bootstrap_servers())
    public = Signer.from_file(receipts_key)
    reports = verify(log.receipts, log.checkpoints, {public.key_id: public.public})
    assert reports and all(r.verdict is Verdict.VERIFIED for r in reports), reports
    assert {r.chain for r in reports} <= {f"decisions/{p}" for p in range(broker.partitions)}

    codec = Codec()
    decided = {}
    for topic in (topics.APPROVED, topics.DROPPED, topics.HELD):
        decided.update(decision_hashes(read_all(broker.bootstrap_servers(), topic, since_ms=module_since_ms), codec))
    ours = {digest: action for digest, action in decided.items() if action in set(ids)}
    assert len(ours) == len(ids)  # one decision each: 51 approved or held, 25 dropped
    mine = [r for r in log.receipts if r.action_id in set(ids)]
    found = certify(mine, ours)
    assert found.ok, found.summary()
    held = [r for r in mine if r.outcome == "HELD"]
    assert len(held) == 1 and held[0].tool == "send_email"
    assert [r.reason for r in mine if r.outcome == "DROPPED"] == ["duplicate_key"] * 25  # derived keys too

    # what an auditor runs: the export, then verify offline with the public key alone
    exported, pub = tmp_path / "receipts.jsonl", tmp_path / "receipts.pub.pem"
    receipts, checkpoints = export(broker.bootstrap_servers(), exported, progress=lambda _: None)
    assert receipts == len(log.receipts) and checkpoints == len(log.checkpoints)
    pub.write_bytes(public_key_pem(public.public))
    capsys.readouterr()
    assert verify_file(exported, [pub]) == 0
    said = capsys.readouterr().out.splitlines()
    assert len(said) == len(reports) + 1 and all(": verified," in line for line in said[:-1]), said

    # one tenant's receipts alone (what its operator, or an agent, keeps): each with its proof,
    # and no other tenant's receipt in the file
    filtered = tmp_path / "acme.jsonl"
    written, _ = export(broker.bootstrap_servers(), filtered, progress=lambda _: None,
                        selection=Selection(tenant=f"acme-{run}"))
    held_by_acme = [json.loads(line)["receipt"]["action_id"] for line in filtered.read_bytes().splitlines()]
    assert written == 5 and sorted(held_by_acme) == sorted(theirs)
    capsys.readouterr()
    assert verify_file(filtered, [pub]) == 0
    assert "5 receipts, each proven alone under its signed checkpoint: every one proven" in capsys.readouterr().out
