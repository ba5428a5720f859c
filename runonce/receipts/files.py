"""Receipts as an auditor holds them: a file of JSON lines, as ``runonce audit export`` writes
them: whole chains (each segment's lines verbatim: a receipt's canonical bytes or a
checkpoint's), or, for a filtered export, proofs (a receipt with its signed checkpoint and
its audit path, each line standing alone)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

from runonce.receipts.receipt import Receipt
from runonce.receipts.signing import Checkpoint
from runonce.receipts.verify import Proof


@dataclass(frozen=True, slots=True)
class Lines:
    receipts: list[Receipt] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    proofs: list[Proof] = field(default_factory=list)


def read_lines(lines: Iterable[bytes], where: str) -> Lines:
    """What ``lines`` hold; ValueError naming the first line that is none of the three."""
    out = Lines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            if "root" in raw:
                out.checkpoints.append(Checkpoint(**raw))
            elif "kind" in raw:
                out.receipts.append(Receipt.from_json(raw))
            elif "receipt" in raw:
                out.proofs.append(Proof.from_json(raw))
            else:
                raise ValueError("neither a receipt (no kind), a checkpoint (no root) nor a proof (no receipt)")
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}:{number}: {exc}") from None
    return out
