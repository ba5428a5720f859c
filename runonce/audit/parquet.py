"""Receipts as a Parquet file: a row a receipt, with its signed checkpoint and its audit path
beside it (each row a proof that stands alone: runonce/receipts/verify.py ``Proof``), for an
auditor who reads receipts with a query engine. ``runonce audit verify`` reads it back: each row
proven alone, and, for a whole export (the file's ``runonce.whole`` metadata), every chain too.
The columns are the fields of ``Receipt`` and ``Checkpoint`` (``checkpoint_`` before the
latter's), declared there once; ``path`` a list of hex hashes."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from runonce.errors import ConfigError
from runonce.receipts.receipt import FIELDS as RECEIPT_FIELDS
from runonce.receipts.signing import Checkpoint
from runonce.receipts.verify import Proof

CHECKPOINT_FIELDS = fields(Checkpoint)
#: rows a write holds in memory at most
BATCH_ROWS = 10_000
WHOLE = b"runonce.whole"


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError(f"Parquet needs pyarrow: pip install 'runonce[export]' ({exc})") from exc
    return pa, pq


def _schema(pa: Any) -> Any:
    def typed(type_name: Any) -> Any:
        return pa.int64() if type_name in ("int", int) else pa.string()
    return pa.schema([*((f.name, typed(f.type)) for f in RECEIPT_FIELDS),
                      *((f"checkpoint_{f.name}", typed(f.type)) for f in CHECKPOINT_FIELDS),
                      ("path", pa.list_(pa.string()))])


def _row(proof: Proof) -> dict[str, Any]:
    row: dict[str, Any] = dict(proof.receipt.to_json())
    row.update({f"checkpoint_{k}": v for k, v in proof.inclusion.checkpoint.to_json().items()})
    row["path"] = list(proof.inclusion.path)
    return row


class ProofWriter:
    """Rows written as they come, ``BATCH_ROWS`` at a time."""

    def __init__(self, path: Path, whole: bool) -> None:
        pa, pq = _pyarrow()
        self._pa = pa
        self._schema = _schema(pa).with_metadata({WHOLE: b"true" if whole else b"false"})
        self._writer = pq.ParquetWriter(str(path), self._schema, compression="zstd")
        self._rows: list[dict[str, Any]] = []

    def write(self, proof: Proof) -> None:
        self._rows.append(_row(proof))
        if len(self._rows) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(self._pa.Table.from_pylist(self._rows, schema=self._schema))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()


def read_proofs(path: Path) -> tuple[list[Proof], bool]:
    """The proofs of a file ``ProofWriter`` wrote, and whether it is a whole export; ValueError
    naming the first row that is no proof."""
    _, pq = _pyarrow()
    try:
        table = pq.read_table(str(path))
    except Exception as exc:  # pyarrow raises its own kinds for a file that is no Parquet
        raise ValueError(f"{path}: not a Parquet file of receipts ({exc})") from None
    whole = (table.schema.metadata or {}).get(WHOLE) == b"true"
    proofs = []
    for number, row in enumerate(table.to_pylist(), 1):
        try:
            proofs.append(Proof.from_json({
                "receipt": {f.name: row.get(f.name) for f in RECEIPT_FIELDS if row.get(f.name) is not None},
                "checkpoint": {f.name: row.get(f"checkpoint_{f.name}") for f in CHECKPOINT_FIELDS},
                "path": row.get("path")}))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}: row {number}: {exc}") from None
    return proofs, whole
