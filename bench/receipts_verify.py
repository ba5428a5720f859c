"""What receipts weigh and how fast an auditor verifies them, offline: ``--receipts`` decision
receipts made as the worker makes them (runonce/receipts: chained on ``--chains`` chains, a
signed checkpoint every ``--per-checkpoint``), then verified with the public key alone.

Reports bytes per receipt (its canonical bytes, the record's value on actions.receipts) and
per checkpoint, the time to make them, and ``verify``'s time scaled to a million receipts.
Then what writing one costs the worker: µs a decision's receipt as the worker writes it
(``Receipts.add`` with ``decision_bytes``, sealed and signed a segment every 100, the
transactions of a busy worker), against a ``Receipt`` made field by field where its chain
stands and written by ``to_bytes`` (how the worker wrote them before 2026-12-08), in turns.

    .venv/bin/python bench/receipts_verify.py [--receipts 200000] [--chains 6] [--per-checkpoint 500]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from runonce.kafka import topics  # noqa: E402
from runonce.kafka.receipts import Receipts  # noqa: E402
from runonce.kafka.record import Out  # noqa: E402
from runonce.receipts.canonical import canonical_bytes  # noqa: E402
from runonce.receipts.chain import Head  # noqa: E402
from runonce.receipts.receipt import Kind, Receipt  # noqa: E402
from runonce.receipts.signing import Checkpoint, Signer  # noqa: E402
from runonce.receipts.verify import Verdict, verify  # noqa: E402
from runonce.sdk.submit import build_request  # noqa: E402
from runonce.streams.receipts import decision_bytes  # noqa: E402
from runonce.wire.headers import H_POLICIES  # noqa: E402
from runonce.wire.trace import TRACEPARENT  # noqa: E402

#: receipts a transaction in the writing measurement (a busy worker's)
PER_TRANSACTION = 100


def _decision() -> tuple[Out, dict[str, Any], dict[str, Any]]:
    request = build_request("charge_payment", {"amount_cents": 4200, "customer": "c-1", "card": "tok_visa"},
                            agent_id="billing-agent", idempotency_key="order-1")
    record = {"request": request, "outcome": "APPROVED", "reason": "unique", "event_time_ms": 1_800_000_000_000,
              "verdict_by": None}
    out = Out(topics.APPROVED, b"k", b"d" * 700, decision=record, headers=(
        (H_POLICIES, b"7a66813d4963"), (TRACEPARENT, b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")))
    return out, request, record


def writing_us(n: int, signer: Signer) -> tuple[float, float]:
    """µs a receipt: the worker's path, and the object path, each the best of three turns."""
    out, request, record = _decision()

    def worker_path() -> None:
        receipts = Receipts(signer)
        receipts.own(0, Head("decisions/0"))
        for i in range(n):
            receipts.add(0, decision_bytes, out)
            if (i + 1) % PER_TRANSACTION == 0:
                receipts.segments(1)
                receipts.committed_now()

    def object_path() -> None:
        head, placed = Head("decisions/0"), []
        for i in range(n):
            receipt = Receipt(
                chain=head.chain, seq=head.next_seq, prev=head.last_digest, kind=Kind.DECISION,
                action_id=request["action_id"], tenant="default", agent_id=request["agent_id"], tool=request["tool"],
                params_sha256=hashlib.sha256(request["params_json"].encode()).hexdigest(), policy="7a66813d4963",
                outcome=record["outcome"], reason=record["reason"], record_sha256=hashlib.sha256(out.value or b"").hexdigest(),
                at_ms=record["event_time_ms"], trace_id="0af7651916cd43dd8448eb211c80319c")
            data = receipt.to_bytes()
            head = head.after(data)
            placed.append(data)
            if len(placed) == PER_TRANSACTION:
                signer.checkpoint_over(head.chain, head.next_seq - len(placed), placed, head.last_digest, 1)
                placed = []

    best = {worker_path: float("inf"), object_path: float("inf")}
    for _ in range(3):
        for path in best:
            started = time.perf_counter()
            path()
            best[path] = min(best[path], time.perf_counter() - started)
    return best[worker_path] / n * 1e6, best[object_path] / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--receipts", type=int, default=200_000)
    ap.add_argument("--chains", type=int, default=6)
    ap.add_argument("--per-checkpoint", type=int, default=500)
    args = ap.parse_args()
    signer = Signer(Ed25519PrivateKey.generate())
    heads = [Head(f"decisions/{p}") for p in range(args.chains)]
    open_: list[list[Receipt]] = [[] for _ in range(args.chains)]
    receipts: list[Receipt] = []
    checkpoints: list[Checkpoint] = []
    started = time.perf_counter()
    for i in range(args.receipts):
        p = i % args.chains
        receipt, heads[p] = heads[p].link(Receipt(
            chain="", seq=0, prev="", kind=Kind.DECISION, action_id=f"{i:08d}-4b1c-9d2e-action", tenant="default",
            agent_id="billing-agent", tool="charge_payment", params_sha256=hashlib.sha256(b"%d" % i).hexdigest(),
            policy="7a66813d4963", outcome="APPROVED", reason="unique",
            record_sha256=hashlib.sha256(b"r%d" % i).hexdigest(), at_ms=1_800_000_000_000 + i,
            trace_id=hashlib.md5(b"%d" % i).hexdigest()))
        receipts.append(receipt)
        open_[p].append(receipt)
        if len(open_[p]) == args.per_checkpoint:
            checkpoints.append(signer.checkpoint(open_[p], 1_800_000_000_000 + i))
            open_[p] = []
    checkpoints += [signer.checkpoint(rs, 1_800_000_000_000 + args.receipts) for rs in open_ if rs]
    made_s = time.perf_counter() - started
    receipt_bytes = sum(len(r.to_bytes()) for r in receipts) / len(receipts)
    checkpoint_bytes = sum(len(canonical_bytes(c.to_json())) for c in checkpoints) / len(checkpoints)
    started = time.perf_counter()
    reports = verify(receipts, checkpoints, {signer.key_id: signer.public})
    verify_s = time.perf_counter() - started
    assert all(r.verdict is Verdict.VERIFIED for r in reports), reports
    print(f"{args.receipts:,} receipts on {args.chains} chains, a checkpoint every {args.per_checkpoint}: "
          f"{receipt_bytes:.0f} bytes a receipt, {checkpoint_bytes:.0f} a checkpoint "
          f"({checkpoint_bytes / args.per_checkpoint:.1f} a receipt); made in {made_s:.1f} s "
          f"({made_s / args.receipts * 1e6:.0f} µs each, signing included); verified in {verify_s:.1f} s: "
          f"{verify_s / args.receipts * 1e6:.1f} s per million receipts")
    worker_us, object_us = writing_us(min(args.receipts, 50_000), signer)
    print(f"writing a decision's receipt, a segment every {PER_TRANSACTION}: {worker_us:.1f} µs as the worker does "
          f"(its bytes in one formatting); {object_us:.1f} µs as a Receipt made and written field by field")


if __name__ == "__main__":
    main()
