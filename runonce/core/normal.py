"""The one normal form of identity: the values runonce compares to decide "the same action,
the same recipient, the same resource". What is executed is what the agent sent; only the
comparison uses these forms.

- every string, at every depth of params: Unicode NFC (``é`` typed as one code point or as
  ``e`` + a combining accent is one value);
- a field a policy names as an email address (``normalize = { to = "email" }``): NFC, surrounding
  space stripped, then case-folded whole. RFC 5321 lets a server treat the local part as case
  sensitive; no mainstream mail provider does, and for deduplication the error on this side is
  a blocked repeat, never a second email to one mailbox.
"""

from __future__ import annotations

import enum
import unicodedata
from typing import Any


class NormalForm(enum.Enum):
    TEXT = "text"
    EMAIL = "email"


def nfc(value: Any) -> Any:
    """``value`` with every string in it (keys too) in NFC. Depth is bounded before this runs."""
    if isinstance(value, str):
        # ASCII is NFC, and asking a str whether it is ASCII reads a flag
        return value if value.isascii() or unicodedata.is_normalized("NFC", value) else unicodedata.normalize(
            "NFC", value)
    if isinstance(value, dict):
        return {nfc(k): nfc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nfc(v) for v in value]
    return value


def apply(form: NormalForm, value: Any) -> Any:
    """``value`` (already NFC) in ``form``; non-strings are left to the caller's type rules."""
    if form is NormalForm.EMAIL and isinstance(value, str):
        return value.strip().casefold()
    return value
