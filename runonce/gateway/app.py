"""The gateway's HTTP app: MCP at ``/mcp`` and the HTTP API at ``/v1/actions`` behind one
bearer-token check; ``/openapi.json``, ``/metrics`` (Prometheus), ``/healthz`` and
``/readyz`` (a Kubernetes probe's: ready while it serves, the broker away or not) for anyone (they
describe, they perform nothing).

Authentication is the mcp package's: ``BearerAuthBackend`` turns a token into a user,
``RequireAuthMiddleware`` answers 401 with ``WWW-Authenticate: Bearer`` without one."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route, request_response

from runonce.core.policy import PolicyBook
from runonce.gateway.auth import TokenFileVerifier
from runonce.gateway.http_api import HttpApi
from runonce.gateway.openapi import document


class BrokerWatch:
    """The broker's reachability as last seen, asked in the background every ``every_s``:
    ``/readyz`` answers from it at once. Asking Kafka takes seconds while it is away, and a
    kubelet's probe gives up after one second by default: a probe that asked would fail, and
    every replica would leave its Service in a broker outage (agents refused, not answered 503)."""

    def __init__(self, ask: Callable[[], str | None], every_s: float = 5.0) -> None:
        self._ask, self._every_s = ask, every_s
        #: why a publish cannot go out now (None: it can), as last asked
        self.unreachable: str | None = "the broker not asked yet"

    async def run(self) -> None:
        while True:
            self.unreachable = await anyio.to_thread.run_sync(self._ask, abandon_on_cancel=True)
            await anyio.sleep(self._every_s)


def create_gateway_app(mcp_server: Server[Any], api: HttpApi, policies: PolicyBook, tokens_file: Path) -> Starlette:
    from prometheus_client import make_asgi_app

    # stateless (MCP 2026-07-28): no session to keep, so any replica answers any call
    manager = StreamableHTTPSessionManager(app=mcp_server, stateless=True)
    spec = document(policies)
    broker = BrokerWatch(api.calls.client.unreachable)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as watching, manager.run():
            watching.start_soon(broker.run)
            yield
            watching.cancel_scope.cancel()

    async def openapi(_: Request) -> Response:
        return JSONResponse(spec)

    async def healthz(_: Request) -> Response:
        # answered by the event loop that serves every call: if this answers, calls are served
        return PlainTextResponse("gateway: serving\n")

    async def readyz(_: Request) -> Response:
        # Ready whenever it serves, the broker reachable or not: without the broker a call is
        # answered 503 with Retry-After, which agents retry; an unready gateway would leave its
        # Service and be refused instead (every replica at once, in a broker outage). The
        # body says the broker's state as last seen (BrokerWatch: never asked on the probe's time).
        why = broker.unreachable
        if why is not None:
            return PlainTextResponse(f"gateway: ready; calls answer 503 until the broker is back: {why}\n")
        return PlainTextResponse("gateway: ready\n")

    def guarded(app: Any) -> Any:
        return RequireAuthMiddleware(app, required_scopes=[])

    routes = [
        Route("/mcp", endpoint=guarded(StreamableHTTPASGIApp(manager))),
        Route("/v1/actions/{tool}", endpoint=guarded(request_response(api.post_action)), methods=["POST"]),
        Route("/v1/actions/{action_id}", endpoint=guarded(request_response(api.get_action)), methods=["GET"]),
        Route("/openapi.json", endpoint=openapi, methods=["GET"]),
        Route("/healthz", endpoint=healthz, methods=["GET"]),
        Route("/readyz", endpoint=readyz, methods=["GET"]),
        Mount("/metrics", app=make_asgi_app(api.calls.metrics.registry)),
    ]
    middleware = [Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(TokenFileVerifier(tokens_file))),
                  Middleware(AuthContextMiddleware)]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def serve(app: Starlette, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning")
