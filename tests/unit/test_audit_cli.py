"""``runonce audit verify``: a file of receipts checked offline with the public key alone; the
first bad record named, the exit status what a script branches on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runonce.errors import ConfigError
from runonce.ops.audit_cli import verify_file
from runonce.receipts.canonical import canonical_bytes
from runonce.receipts.signing import Signer, public_key_pem
from runonce.receipts.verify import proofs_of
from tests.unit.test_receipts import _log


def _files(tmp_path: Path, lines: list[bytes], signer: Signer) -> tuple[Path, Path]:
    receipts = tmp_path / "receipts.jsonl"
    receipts.write_bytes(b"\n".join(lines) + b"\n")
    key = tmp_path / "receipts.pub.pem"
    key.write_bytes(public_key_pem(signer.public))
    return receipts, key


def _exported(n: int) -> tuple[list[bytes], Signer]:
    from tests.unit.test_receipts import SIGNER

    receipts, checkpoints = _log(n)
    lines: list[bytes] = []
    for i, r in enumerate(receipts):  # as segments: a checkpoint after its receipts
        lines.append(r.to_bytes())
        lines += [canonical_bytes(c.to_json()) for c in checkpoints if c.last_seq == i]
    return lines, SIGNER


def test_an_intact_export_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines, signer = _exported(12)
    receipts, key = _files(tmp_path, lines, signer)
    assert verify_file(receipts, [key]) == 0
    out = capsys.readouterr().out
    assert "decisions/0: verified, 12 receipts, signed through #11" in out and "every chain intact" in out


@pytest.mark.parametrize("form, line, said", [
    ("chains", 2, ["decisions/0: tampered", "decisions/0#2 (action a-2)", "1 NOT VERIFIED"]),
    ("proofs", 1, ["not proven: decisions/0#5 (action a-5)", "1 NOT PROVEN"]),  # a filtered export's
])
def test_a_changed_byte_fails_and_names_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str,
                                                   line: int, said: list[str]) -> None:
    lines, signer = _exported(12) if form == "chains" else _proofs(12)
    lines[line] = lines[line].replace(b'"outcome":"APPROVED"', b'"outcome":"DROPPED"')
    receipts, key = _files(tmp_path, lines, signer)
    assert verify_file(receipts, [key]) == 1
    out = capsys.readouterr().out
    assert all(phrase in out for phrase in said), out


def test_a_removed_receipt_is_a_gap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines, signer = _exported(12)
    del lines[7]  # receipt #6 (a checkpoint line follows #3)
    receipts, key = _files(tmp_path, lines, signer)
    assert verify_file(receipts, [key]) == 1
    assert "decisions/0: gap, 11 receipts, signed through #3: decisions/0#6 is missing" in capsys.readouterr().out


def test_another_key_verifies_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines, _ = _exported(4)
    receipts, key = _files(tmp_path, lines, Signer(Ed25519PrivateKey.generate()))
    assert verify_file(receipts, [key]) == 1
    assert "not one of the 1 keys given" in capsys.readouterr().out


def test_a_line_that_is_no_receipt_is_named_by_its_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines, signer = _exported(4)
    lines.insert(2, b'{"note": "added by hand"}')
    receipts, key = _files(tmp_path, lines, signer)
    assert verify_file(receipts, [key]) == 1
    assert f"tampered: {receipts}:3: neither a receipt" in capsys.readouterr().out


def test_no_key_and_no_file_are_said(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs --key"):
        verify_file(tmp_path / "r.jsonl", [])
    with pytest.raises(ConfigError, match="no such file"):
        verify_file(tmp_path / "r.jsonl", [tmp_path / "k.pem"])


def _proofs(n: int) -> tuple[list[bytes], Signer]:
    """A filtered export: receipts #4..#7 of a chain, each with its proof."""
    from tests.unit.test_receipts import SIGNER

    receipts, checkpoints = _log(n)
    return [json.dumps(p.to_json(), sort_keys=True, separators=(",", ":")).encode()
            for p in proofs_of(receipts[4:8], checkpoints[1])], SIGNER


def test_a_filtered_export_proves_each_receipt_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines, signer = _proofs(12)
    receipts, key = _files(tmp_path, lines, signer)
    assert verify_file(receipts, [key]) == 0
    assert "4 receipts, each proven alone under its signed checkpoint: every one proven" in capsys.readouterr().out




def test_an_empty_file_proves_nothing(tmp_path: Path) -> None:
    receipts, key = _files(tmp_path, [], Signer(Ed25519PrivateKey.generate()))
    assert verify_file(receipts, [key]) == 1


def test_an_effect_of_an_action_no_decision_approved_fails_though_every_chain_is_intact(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Chains that each verify, and disagree: an executor's signed outcome of an action that no
    signed decision approved (a receipt for an effect the stream job never allowed)."""
    from dataclasses import replace

    from runonce.receipts.chain import Head
    from runonce.receipts.receipt import Kind
    from tests.unit.test_receipts import _receipt

    lines, signer = _exported(4)  # a-0 .. a-3 approved
    outcomes = []
    head = Head("outcomes/runonce-exec-payments/0")
    for action in ("a-1", "ghost"):
        placed, head = head.link(replace(_receipt(0), kind=Kind.OUTCOME, action_id=action, outcome="succeeded"))
        outcomes.append(placed)
    lines += [r.to_bytes() for r in outcomes] + [canonical_bytes(signer.checkpoint(outcomes, 1).to_json())]
    receipts, key = _files(tmp_path, lines, signer)
    assert verify_file(receipts, [key]) == 1
    out = capsys.readouterr().out
    assert "every chain intact" in out and "2 actions performed: NOT each approved exactly once" in out
    assert "across chains: outcomes/runonce-exec-payments/0#1: an outcome of action ghost" in out


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "filtered"])
def test_a_parquet_export_verifies_and_a_changed_cell_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                whole: bool) -> None:
    """A row a receipt with its checkpoint and path (runonce/audit/parquet.py): read back, a whole
    export's chains verify, a filtered one's rows are each proven; one cell changed fails."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from runonce.audit.parquet import ProofWriter
    from tests.unit.test_receipts import SIGNER

    receipts, checkpoints = _log(12)
    path, key = tmp_path / "receipts.parquet", tmp_path / "receipts.pub.pem"
    key.write_bytes(public_key_pem(SIGNER.public))
    rows = ProofWriter(path, whole=whole)
    for c in checkpoints:
        for proof in proofs_of(receipts[c.first_seq:c.last_seq + 1], c):
            rows.write(proof)
    rows.close()
    assert verify_file(path, [key]) == 0
    out = capsys.readouterr().out
    assert ("decisions/0: verified, 12 receipts" in out) if whole else ("every one proven" in out), out

    table = pq.read_table(str(path))
    outcomes = table.column("outcome").to_pylist()
    outcomes[5] = "DROPPED"
    pq.write_table(table.set_column(table.schema.get_field_index("outcome"), "outcome", pa.array(outcomes)),
                   str(path))
    assert verify_file(path, [key]) == 1
    out = capsys.readouterr().out
    assert ("decisions/0: tampered" in out) if whole else ("not proven: decisions/0#5 (action a-5)" in out), out
