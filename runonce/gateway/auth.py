"""Bearer tokens for the HTTP gateway, through the mcp package's own authorization pieces
(``BearerAuthBackend``, ``RequireAuthMiddleware``: a request without a valid token gets a
401 with ``WWW-Authenticate: Bearer``). Tokens are checked against the gateway tokens file
(hashes only; ``runonce gateway token add|list|revoke``), re-read on each request so a
revocation applies at once."""

from __future__ import annotations

from pathlib import Path

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.requests import HTTPConnection

from runonce import tokens
from runonce.gateway.calls import Caller

#: the scope a token carries for each tool it may call (every tool: ``tool:*``)
SCOPE_PREFIX = "tool:"
#: the scope that names the token's tenant
TENANT_PREFIX = "tenant:"


class TokenFileVerifier:
    """The mcp package's ``TokenVerifier``: a token in the file is its holder, as client_id."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def verify_token(self, token: str) -> AccessToken | None:
        holder = tokens.who(self.path, token)
        if holder is None:
            return None
        scopes = [SCOPE_PREFIX + t for t in sorted(holder.tools)] if holder.tools is not None else [
            SCOPE_PREFIX + tokens.EVERY_TOOL]
        return AccessToken(token=token, client_id=holder.name, scopes=[*scopes, TENANT_PREFIX + holder.tenant])


def caller_of(conn: HTTPConnection | None) -> Caller | None:
    """The authenticated caller of a request (None: not authenticated)."""
    user = conn.scope.get("user") if conn is not None else None
    if not isinstance(user, AuthenticatedUser):
        return None
    allowed = [s.removeprefix(SCOPE_PREFIX) for s in user.scopes if s.startswith(SCOPE_PREFIX)]
    tenant = next((s.removeprefix(TENANT_PREFIX) for s in user.scopes if s.startswith(TENANT_PREFIX)), None)
    if tenant is None:  # every token the verifier passes names one; an AccessToken without is not ours
        return None
    return Caller(user.access_token.client_id, None if tokens.EVERY_TOOL in allowed else frozenset(allowed), tenant)
