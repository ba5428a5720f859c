"""Canonical JSON and content hashes: the same logical params always hash the same.

Canonical form: keys sorted at every depth, no insignificant whitespace, UTF-8, NaN
and Infinity refused. Numbers keep their JSON type (1 and 1.0 differ), which is what
the agent sent.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: made once: ``json.dumps`` with any option builds a new encoder at each call
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash(tool: str, params: Any) -> str:
    """Hash of what the action does: its tool and its canonical params."""
    return sha256_hex(canonical_json([tool, params]))
