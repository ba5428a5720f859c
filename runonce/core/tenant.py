"""Tenants: whose a key is. Every dedup scope (idempotency key, content window, natural id,
budget), every vendor key and every result lookup belongs to one tenant, so one agent can
neither read another's action nor block it by reusing its key (as Stripe scopes keys to the
account).

A tenant's keys are its own through ``scoped``. The default tenant's keys stay as they were,
so a single-tenant deployment and the state it already holds notice nothing; the mapping
stays one-to-one because a default-tenant key that looks scoped is scoped too."""

from __future__ import annotations

from runonce.core import limits
from runonce.errors import InvalidAction

DEFAULT_TENANT = "default"
PREFIX = "tenant/"


def check_tenant(tenant: str, action_id: str = "?") -> str:
    """A tenant name: 1..MAX_TENANT_CHARS printable characters, no '/' and no whitespace."""
    if tenant == DEFAULT_TENANT:
        return tenant
    if (not isinstance(tenant, str) or not 0 < len(tenant) <= limits.MAX_TENANT_CHARS or not tenant.isprintable()
            or "/" in tenant or any(c.isspace() for c in tenant)):
        raise InvalidAction(f"action {action_id}: tenant must be 1..{limits.MAX_TENANT_CHARS} printable characters "
                            f"without '/' or spaces, got {str(tenant)[:80]!r}")
    return tenant


def scoped(tenant: str, key: str) -> str:
    """``key`` as ``tenant``'s own: unchanged for the default tenant (unless it begins with the
    prefix), ``tenant/<tenant>/<key>`` otherwise. A tenant name holds no '/', so two (tenant,
    key) pairs never give one result."""
    if tenant == DEFAULT_TENANT and not key.startswith(PREFIX):
        return key
    return f"{PREFIX}{tenant}/{key}"
