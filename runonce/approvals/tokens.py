"""Approvers' tokens for the approvals page: each person has one, the file keeps only hashes.

Format, one approver per line: ``name:sha256(token) hex``. ``runonce approvals token NAME``
adds one and prints the token once (and the link that signs its holder in)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from pathlib import Path

from runonce.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def read(path: Path) -> dict[str, str]:
    """{name: token hash}. A malformed line is a ConfigError naming it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"approver tokens file {path} cannot be read: {exc}") from exc
    out: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, digest = line.strip().partition(":")
        if not _NAME.match(name) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ConfigError(f"{path}:{number}: expected name:sha256-hex, got {line[:40]!r}")
        out[name] = digest
    return out


def add(path: Path, name: str) -> str:
    """A new token for ``name`` (replacing any it had); returns the token, never stored."""
    if not _NAME.match(name):
        raise ConfigError(f"approver name {name!r}: letters, digits and _ . @ - only, at most 64")
    token = secrets.token_urlsafe(24)
    known = read(path)
    known[name] = _digest(token)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{n}:{d}\n" for n, d in sorted(known.items())), encoding="utf-8")
    path.chmod(0o600)
    return token


def revoke(path: Path, name: str) -> bool:
    """Forget ``name``'s token; False if it had none."""
    known = read(path)
    if known.pop(name, None) is None:
        return False
    path.write_text("".join(f"{n}:{d}\n" for n, d in sorted(known.items())), encoding="utf-8")
    return True


def who(path: Path, token: str) -> str | None:
    """The approver ``token`` belongs to, or None."""
    digest = _digest(token)
    found = None
    for name, known in read(path).items():
        if hmac.compare_digest(known, digest):
            found = name
    return found
