"""The one encoding of what is signed and hashed: JSON in the form of RFC 8785 (JCS) for the
values receipts hold (strings, integers, booleans, null): members sorted by name, no
whitespace, UTF-8, strings escaped as JSON must (a quote, a backslash, control characters)
and nothing else. Anyone can recompute it: ``json.dumps(value, sort_keys=True,
separators=(",", ":"), ensure_ascii=False).encode()`` in Python gives these bytes.

Integers are bounded to 2**53 (what every JSON reader holds exactly); a lone surrogate has no
UTF-8 form. Either is refused, naming the field."""

from __future__ import annotations

import hashlib
import json
from typing import Mapping, Union

Value = Union[str, int, bool, None]

#: what every JSON reader (a JavaScript one too) holds exactly
MAX_INT = 2**53
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class NotCanonical(ValueError):
    """A value a receipt cannot hold."""


def canonical_bytes(fields: Mapping[str, Value]) -> bytes:
    for name, value in fields.items():
        if isinstance(value, int) and not isinstance(value, bool) and not -MAX_INT <= value <= MAX_INT:
            raise NotCanonical(f"{name}: {value} is past 2**53")
        if value is not None and not isinstance(value, (str, int)):
            raise NotCanonical(f"{name}: a {type(value).__name__} is not a receipt's value")
    try:
        return _ENCODER.encode(dict(fields)).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotCanonical(f"a string with no UTF-8 form: {exc.reason}") from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
