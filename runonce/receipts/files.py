"""Receipts as an auditor holds them: a file of JSON lines, each a receipt's canonical bytes or
a checkpoint's, as ``runonce audit export`` writes them (each segment's lines, verbatim)."""

from __future__ import annotations

import json
from typing import Iterable

from runonce.receipts.receipt import Receipt
from runonce.receipts.signing import Checkpoint


def read_lines(lines: Iterable[bytes], where: str) -> tuple[list[Receipt], list[Checkpoint]]:
    """The receipts and checkpoints of ``lines``; ValueError naming the first line that is neither."""
    receipts: list[Receipt] = []
    checkpoints: list[Checkpoint] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            if "root" in raw:
                checkpoints.append(Checkpoint(**raw))
            elif "kind" in raw:
                receipts.append(Receipt.from_json(raw))
            else:
                raise ValueError("neither a receipt (no kind) nor a checkpoint (no root)")
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}:{number}: {exc}") from None
    return receipts, checkpoints
