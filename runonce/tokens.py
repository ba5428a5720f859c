"""Bearer tokens kept as hashes: approvers' (the approvals page) and agents' (the gateway).

One holder per line: ``name:sha256(token) hex``, and for an agent ``:tool,tool`` or ``:*``,
the tools its token may call, then ``:tenant`` when the agent shares a tenant (without it,
an agent is a tenant of its own, named after it: core/tenant.py). ``add`` prints the token once; the file never holds it, and a
leaked file names holders without letting anyone act as them. The file is read on every
check, so a revoked token stops working at once, without a restart."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from runonce.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9_.@:-]{1,64}$")
_TOOL = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_TENANT = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
EVERY_TOOL = "*"


@dataclass(frozen=True, slots=True)
class Holder:
    name: str
    digest: str
    #: the tools this token may call; None: every tool (and for approvers, not asked)
    tools: frozenset[str] | None = None
    #: whose keys and results the agent's actions are; None: a tenant of its own, its name
    shared_tenant: str | None = None

    @property
    def tenant(self) -> str:
        return self.shared_tenant or self.name

    def may_call(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools

    def line(self) -> str:
        tools = EVERY_TOOL if self.tools is None else ",".join(sorted(self.tools))
        if self.shared_tenant is not None:
            return f"{self.name}:{self.digest}:{tools}:{self.shared_tenant}"
        if self.tools is None:
            return f"{self.name}:{self.digest}"
        return f"{self.name}:{self.digest}:{tools}"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _parse(path: Path, number: int, line: str) -> Holder:
    # the name may hold ':' (agent ids like "team:billing"): the digest is the 64-hex field
    m = re.fullmatch(r"(?P<name>.+?):(?P<digest>[0-9a-f]{64})(?::(?P<tools>[^:]*)(?::(?P<tenant>[^:]+))?)?",
                     line.strip())
    if m is None or not _NAME.match(m["name"]):
        raise ConfigError(f"{path}:{number}: expected name:sha256-hex[:tools[:tenant]], got {line[:40]!r}")
    tenant = m["tenant"]
    if tenant is not None and not _TENANT.match(tenant):
        raise ConfigError(f"{path}:{number}: tenant must be letters, digits and _ . @ - only, got {tenant[:40]!r}")
    tools = m["tools"]
    if tools is None or tools == EVERY_TOOL:
        return Holder(m["name"], m["digest"], None, tenant)
    names = frozenset(t for t in tools.split(",") if t)
    if not all(_TOOL.match(t) for t in names):
        raise ConfigError(f"{path}:{number}: tools must be names separated by ',' or '*', got {tools[:40]!r}")
    return Holder(m["name"], m["digest"], names, tenant)


def read(path: Path) -> dict[str, Holder]:
    """{name: holder}. A missing file holds no one; a malformed line is a ConfigError naming it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"tokens file {path} cannot be read: {exc}") from exc
    out: dict[str, Holder] = {}
    for number, line in enumerate(lines, 1):
        if line.strip() and not line.lstrip().startswith("#"):
            holder = _parse(path, number, line)
            out[holder.name] = holder
    return out


def _write(path: Path, holders: dict[str, Holder]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(h.line() + "\n" for _, h in sorted(holders.items())), encoding="utf-8")
    tmp.chmod(0o600)
    tmp.replace(path)  # a reader never sees half a file


def add(path: Path, name: str, tools: frozenset[str] | None = None, tenant: str | None = None) -> str:
    """A new token for ``name`` (replacing any it had), allowed ``tools`` (None: every tool), in
    ``tenant`` (None: a tenant of its own); returns the token, which is never stored."""
    if not _NAME.match(name):
        raise ConfigError(f"name {name!r}: letters, digits and _ . @ : - only, at most 64")
    if tools is not None and not all(_TOOL.match(t) for t in tools):
        raise ConfigError(f"tools {sorted(tools)}: names of letters, digits and _ . - only")
    if tenant is not None and not _TENANT.match(tenant):
        raise ConfigError(f"tenant {tenant!r}: letters, digits and _ . @ - only, at most 64")
    token = secrets.token_urlsafe(24)
    known = read(path)
    known[name] = Holder(name, token_digest(token), tools, None if tenant in (None, name) else tenant)
    _write(path, known)
    return token


def revoke(path: Path, name: str) -> bool:
    """Forget ``name``'s token; False if it had none."""
    known = read(path)
    if known.pop(name, None) is None:
        return False
    _write(path, known)
    return True


def who(path: Path, token: str) -> Holder | None:
    """The holder of ``token``, or None. Every entry is compared, in constant time each."""
    digest = token_digest(token)
    found = None
    for holder in read(path).values():
        if hmac.compare_digest(holder.digest, digest):
            found = holder
    return found
