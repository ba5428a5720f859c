"""What receipts weigh and how fast an auditor verifies them, offline: ``--receipts`` decision
receipts made as the worker makes them (runonce/receipts: chained on ``--chains`` chains, a
signed checkpoint every ``--per-checkpoint``), then verified with the public key alone.

Reports bytes per receipt (its canonical bytes, the record's value on actions.receipts) and
per checkpoint, the time to make them, and ``verify``'s time scaled to a million receipts.

    .venv/bin/python bench/receipts_verify.py [--receipts 200000] [--chains 6] [--per-checkpoint 500]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from runonce.receipts.canonical import canonical_bytes  # noqa: E402
from runonce.receipts.chain import Head  # noqa: E402
from runonce.receipts.receipt import Kind, Receipt  # noqa: E402
from runonce.receipts.signing import Checkpoint, Signer  # noqa: E402
from runonce.receipts.verify import Verdict, verify  # noqa: E402


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


if __name__ == "__main__":
    main()
