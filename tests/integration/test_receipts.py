"""Receipts on the real broker: a worker with a key writes one receipt for each decision in the
decision's transaction, and an executor with a key one for each final result in the result's,
chained per partition and signed at each transaction's end; the chains verify offline with only
the public key, every decision and every result has exactly one receipt, and the agent holds
its result's."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from runonce.audit.receipts import (
    Selection,
    certify,
    check,
    decision_hashes,
    export,
    final_result_hashes,
    read_receipts,
)
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.kafka import groups, topics
from runonce.kafka.reader import read_all
from runonce.ops.audit_cli import verify_file
from runonce.ops.watch import DecisionWatcher
from runonce.receipts.cross import cross_check
from runonce.receipts.receipt import Kind
from runonce.receipts.signing import Signer, public_key_pem
from runonce.receipts.verify import Proof, Verdict, verify
from runonce.sdk.client import ActionClient
from runonce.sdk.submit import Submitter
from runonce.settings import Settings
from runonce.wire.codec import Codec
from tests.support.worker import RunonceProcess, WorkerProcess


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
    assert len(said) == len(reports) + 2 and all(": verified," in line for line in said[:-2]), said
    assert said[-1].endswith("each approved exactly once (a held one by its approver)"), said

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

    # the same as Parquet, for a query engine: the whole log and the tenant's, each verified
    whole, theirs_pq = tmp_path / "receipts.parquet", tmp_path / "acme.parquet"
    assert export(broker.bootstrap_servers(), whole, progress=lambda _: None)[0] == len(log.receipts)
    assert export(broker.bootstrap_servers(), theirs_pq, progress=lambda _: None,
                  selection=Selection(tenant=f"acme-{run}"))[0] == 5
    capsys.readouterr()
    assert verify_file(whole, [pub]) == 0 and verify_file(theirs_pq, [pub]) == 0
    said = capsys.readouterr().out
    assert f"{len(reports)} chains, {len(log.receipts):,} receipts: every chain intact" in said, said
    assert "5 receipts, each proven alone under its signed checkpoint: every one proven" in said, said


def test_every_outcome_has_one_receipt_in_its_results_transaction_and_the_agent_holds_its_copy(
        broker: Settings, receipts_key: Path, sandboxes: LocalVendors, tmp_path: Path) -> None:
    """A keyed worker and keyed payments executors: the first performs 8 charges and is
    SIGKILLed; its heir, whose every first result transaction is aborted (the ``abort_result``
    failpoint: a coordinator move at the worst moment), performs 4 more and answers 4 repeats.
    Each result committed carries its receipt's proof to the agent, the heir's receipts go on
    where the first's chains stand, each final result has exactly one outcome receipt and each
    outcome receipt its result, and every action performed was approved once."""
    run = uuid.uuid4().hex[:8]
    bootstrap = broker.bootstrap_servers()
    tenant = f"out-{run}"
    since_ms = int(time.time() * 1000) - 1000
    keyed = {"RUNONCE_RECEIPTS_KEY": str(receipts_key)}
    group = f"runonce-exec-receipts-{run}"
    groups.start_group_at_end(bootstrap, group, topics.APPROVED)  # earlier tests' approvals are not ours
    worker = WorkerProcess(broker, f"receipts-out-{run}", tmp_path, extra_env=keyed)
    argv = ["executor", "--vendor", "payments", "--group", group]
    first = RunonceProcess(broker, f"receipts-exec-{run}", argv, tmp_path, {**keyed, **sandboxes.env()})
    heir = RunonceProcess(broker, f"receipts-heir-{run}", argv, tmp_path,
                          {**keyed, **sandboxes.env(), "RUNONCE_EXECUTOR_FAILPOINT": "abort_result"})
    worker.start()
    first.start()
    try:
        with ActionClient(bootstrap, agent_id="billing", tenant=tenant) as client:
            def charge(i: int) -> Any:
                return client.submit("charge_payment", {"card": "tok_visa", "amount_cents": 100 + i,
                                                        "customer": f"c-{i}"}, idempotency_key=f"{run}-{i}")
            outcomes = [h.result(timeout=120) for h in [charge(i) for i in range(8)]]
            first.kill()
            heir_from_ms = int(time.time() * 1000)
            heir.start()
            # 4 new, 4 repeats of the first's: their original's result, and its receipt
            outcomes += [h.result(timeout=120) for h in [charge(i) for i in range(4, 12)]]
        with ActionClient(bootstrap, agent_id="billing", tenant=f"other-{run}") as neighbour:  # not ours to check
            assert [neighbour.submit("charge_payment", {"card": "tok_visa", "amount_cents": 7, "customer": "n"},
                                     idempotency_key=f"{run}-n-{i}").result(timeout=120).status
                    for i in range(2)] == ["succeeded"] * 2
    finally:
        heir.stop()
        first.stop()
        worker.stop()
    assert [o.status for o in outcomes] == ["succeeded"] * 16, executor.log_tail()
    public = Signer.from_file(receipts_key)
    keys = {public.key_id: public.public}
    performed = {o.result_of for o in outcomes}
    assert len(performed) == 12 and sum(o.repeated for o in outcomes) == 4
    for o in outcomes:  # the agent's own copy: proven with the public key alone
        assert o.receipt is not None, o
        proof = Proof.from_json(json.loads(o.receipt))
        assert proof.problem(keys) is None
        assert (proof.receipt.kind, proof.receipt.action_id, proof.receipt.outcome, proof.receipt.vendor_ref) == (
            Kind.OUTCOME, o.result_of, "succeeded", o.vendor_ref)
        assert proof.receipt.chain.startswith(f"outcomes/{group}/")

    codec = Codec()
    results = {d: a for d, a in final_result_hashes(read_all(bootstrap, topics.RESULTS, since_ms=since_ms),
                                                      codec).items() if a in performed}
    assert sorted(results.values()) == sorted(performed)  # one final result each, the aborted ones not read
    log = read_receipts(bootstrap, since_ms=since_ms)
    ours = [r for r in log.receipts if r.tenant == tenant]
    outcome_receipts = [r for r in ours if r.kind is Kind.OUTCOME]
    found = certify(outcome_receipts, results)
    assert found.ok, found.summary()  # a receipt of an aborted transaction would be one of no result
    chains = {r.chain for r in outcome_receipts}
    reports = [r for r in verify(log.receipts, log.checkpoints, keys) if r.chain in chains]
    assert reports and all(r.verdict is Verdict.VERIFIED for r in reports), reports
    # the heir read where the first's chains stood: some chain holds both's receipts, linked
    both = {r.chain for r in outcome_receipts if r.at_ms < heir_from_ms} & {
        r.chain for r in outcome_receipts if r.at_ms >= heir_from_ms}
    assert both, sorted((r.chain, r.seq, r.at_ms >= heir_from_ms) for r in outcome_receipts)
    across = cross_check(ours)
    assert (across.ok, across.outcomes) == (True, 12), across.problems()
    online = check(bootstrap, since_ms, progress=lambda _: None, tenant=tenant)
    assert online.ok and online.receipts == {Kind.DECISION: 16, Kind.OUTCOME: 12}, (online.decisions.summary(),
                                                                                     online.outcomes.summary())

    # the result topic compacted (or rewritten) past an effect: its receipt names it
    gone = sorted(results)[0]
    compacted = certify(outcome_receipts, {d: a for d, a in results.items() if d != gone})
    assert compacted.phantoms == {results[gone]: 1} and not compacted.uncertified
