"""The storms' receipts check: a run's receipts held against the records it wrote (every one
with exactly one receipt, every receipt with its record) and their chains verified with the
public key of the key made for the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runonce.audit.receipts import certify, read_receipts
from runonce.receipts.receipt import Kind
from runonce.receipts.signing import Signer
from runonce.receipts.verify import Verdict
from runonce.receipts.verify import verify as verify_chains


def receipts_key(home: Path) -> Path:
    """The run's signing key (PEM PKCS#8), made once in its home."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = home / "receipts.pem"
    if not path.exists():
        path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


def receipts_held(bootstrap: str, since_ms: int, kind: Kind, records: dict[str, str], wanted: set[str],
                  key: Path) -> dict[str, Any]:
    """The phase's receipts of ``kind`` (those of ``wanted`` actions) held against ``records``
    (record sha256 -> action id: what the phase wrote), and their chains verified."""
    log = read_receipts(bootstrap, since_ms=since_ms)
    mine = [r for r in log.receipts if r.kind is kind and r.action_id in wanted]
    found = certify(mine, records)
    chains = {r.chain for r in mine}
    signer = Signer.from_file(key)
    reports = [r for r in verify_chains(log.receipts, log.checkpoints, {signer.key_id: signer.public})
               if r.chain in chains]
    return {"receipts": len(mine), "records": len(records), "without_receipt": len(found.uncertified),
            "doubled": len(found.doubled), "of_no_record": len(found.phantoms), "chains": len(reports),
            "chains_not_verified": sorted(f"{r.chain}: {r.verdict.value} {r.problem or ''}" for r in reports
                                          if r.verdict is not Verdict.VERIFIED)}
