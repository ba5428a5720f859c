"""``runonce mcp`` (a local stdio gateway for one agent) and ``runonce gateway`` (the HTTP
gateway: MCP and the HTTP API behind bearer tokens, and its tokens)."""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from runonce import tokens
from runonce.errors import ConfigError
from runonce.ops.commands import Adder, say
from runonce.settings import Settings

if TYPE_CHECKING:
    from runonce.core.policy import PolicyBook


def _tokens_file(settings: Settings, args: argparse.Namespace) -> Path:
    return Path(args.tokens) if args.tokens else settings.home / "gateway.tokens"


def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    if args.http is not None:  # the older spelling of `runonce gateway serve --port`
        args.port, args.max_wait_s, args.held_retry_after_s = args.http, 60.0, 60
        return cmd_gateway_serve(settings, args)
    import anyio

    from runonce.core.policy import PolicyBook
    from runonce.gateway import server
    from runonce.gateway.calls import Caller, Calls
    from runonce.sdk.client import ActionClient

    agent = args.agent or f"local:{getpass.getuser()}"
    policies = PolicyBook.load(settings.policy_file)
    with ActionClient(settings.kafka_access(), agent_id=agent, policies=policies,
                      outcomes=settings.outcomes_access()) as client:
        gateway = server.create_gateway(Calls(client), policies, timeout_s=args.timeout_s, local=Caller(agent, None, args.tenant))
        say(f"MCP gateway on stdio for agent {agent} (Kafka at {settings.kafka_access()})")
        anyio.run(server.serve_stdio, gateway)
    return 0


def cmd_gateway(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "serve":
        return cmd_gateway_serve(settings, args)
    path = _tokens_file(settings, args)
    if args.token_action is None:
        raise ConfigError("runonce gateway token add NAME [--tools a,b] | list | revoke NAME")
    if args.token_action == "list":
        for name, holder in sorted(tokens.read(path).items()):
            tools = ",".join(sorted(holder.tools)) if holder.tools is not None else tokens.EVERY_TOOL
            print(f"{name}\t{tools}\ttenant {holder.tenant}")
        return 0
    if not args.name:
        raise ConfigError(f"runonce gateway token {args.token_action} NAME: name the agent")
    if args.token_action == "revoke":
        found = tokens.revoke(path, args.name)
        print(f"{args.name}: token revoked" if found else f"{args.name} has no token in {path}")
        return 0 if found else 1
    allowed = None if args.tools in (None, tokens.EVERY_TOOL) else frozenset(
        t.strip() for t in args.tools.split(",") if t.strip())
    if allowed is not None:
        from runonce.core.policy import PolicyBook

        _check_served(allowed, PolicyBook.load(settings.policy_file), settings)
    token = tokens.add(path, args.name, allowed, args.tenant)
    say(f"token for agent {args.name} ({args.tools or 'every tool'}; tenant {args.tenant or args.name}); shown once, "
         f"its hash is in {path}")
    print(token)
    return 0


def _unserved(tools: frozenset[str], policies: PolicyBook) -> list[str]:
    """The tools no policy table names: the gateway serves only the tools its policies name."""
    return sorted(t for t in tools if t not in policies.tools)


def token_warnings(holders: Mapping[str, tokens.Holder], policies: PolicyBook) -> list[str]:
    """A token's tools that no policy names: the gateway would answer its calls 404."""
    out = []
    for holder in sorted(holders.values(), key=lambda h: h.name):
        unserved = _unserved(holder.tools or frozenset(), policies)
        if unserved:
            out.append(f"agent {holder.name}'s token allows {', '.join(unserved)}, which no policy names: calls "
                       f"answer 404 until a policy file (RUNONCE_POLICY_FILE) has a [tools.NAME] table")
    return out


def _check_served(tools: frozenset[str], policies: PolicyBook, settings: Settings) -> None:
    """``token add --tools``: a tool the gateway would answer 404 for is a typo or a missing table."""
    import difflib

    unserved = _unserved(tools, policies)
    if not unserved:
        return
    hints = []
    for tool in unserved:
        near = difflib.get_close_matches(tool, sorted(policies.tools), n=1, cutoff=0.8)
        hints.append(f"{tool} (did you mean {near[0]}?)" if near else tool)
    where = settings.policy_file or "the shipped policies"
    raise ConfigError(f"--tools: no policy names {', '.join(hints)}, so the gateway would not serve it: add a "
                      f"[tools.NAME] table to a policy file ({where}; RUNONCE_POLICY_FILE adds to the shipped "
                      f"policies, docs/policies.md)")


def cmd_gateway_serve(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.core.policy import PolicyBook
    from runonce.gateway import server
    from runonce.gateway.app import create_gateway_app, serve
    from runonce.gateway.calls import Calls
    from runonce.gateway.http_api import HttpApi
    from runonce.sdk.client import ActionClient

    path = _tokens_file(settings, args)
    policies = PolicyBook.load(settings.policy_file)
    holders = tokens.read(path)  # a malformed file fails here, not on the first request
    with ActionClient(settings.kafka_access(), agent_id="gateway", policies=policies,
                      outcomes=settings.outcomes_access()) as client:
        calls = Calls(client)
        app = create_gateway_app(server.create_gateway(calls, policies, timeout_s=args.timeout_s),
                         HttpApi(calls, default_wait_s=args.timeout_s, max_wait_s=args.max_wait_s,
                                 held_retry_after_s=args.held_retry_after_s), policies, path)
        base = f"http://{args.host}:{args.port}"
        say(f"gateway on {base}: MCP at /mcp, HTTP API at /v1/actions/TOOL, {base}/openapi.json; "
             f"{len(holders)} agent token(s) in {path} (Kafka at {settings.kafka_access()})")
        if not holders:
            say("no agent may call yet: add a token with `runonce gateway token add AGENT --tools a,b`")
        for warning in token_warnings(holders, policies):
            say(f"warning: {warning}")
        serve(app, args.host, args.port)
    return 0


def add_commands(add: Adder) -> None:
    p = add("mcp", cmd_mcp, "Serve runonce's tools to one local agent over the Model Context Protocol on "
                            "stdio: each tool call becomes an action, performed at most once; the answer is its "
                            "outcome (a repeat gets the original call's result). Over the network use "
                            "`runonce gateway serve` (bearer tokens).")
    p.add_argument("--agent", help="the agent id the actions carry (default local:$USER); the client's own "
                                   "name is never used")
    p.add_argument("--timeout-s", type=float, default=30.0,
                   help="answer a call still without an outcome after this long (calling again is safe)")
    p.add_argument("--tenant", default="default", help="whose keys and results the agent's actions are (default: default)")
    p.add_argument("--http", type=int, metavar="PORT", help=argparse.SUPPRESS)  # = gateway serve --port
    p.add_argument("--host", default="127.0.0.1", help=argparse.SUPPRESS)
    p.add_argument("--tokens", help=argparse.SUPPRESS)
    p = add("gateway", cmd_gateway, "The HTTP gateway for agents in any language: MCP at /mcp and "
                                    "POST /v1/actions/TOOL (Idempotency-Key) behind bearer tokens, each token "
                                    "one agent id and the tools it may call. Example: runonce gateway token add "
                                    "billing-agent --tools charge_payment; runonce gateway serve --port 8765")
    p.add_argument("action", choices=["serve", "token"], help="serve: run the gateway; token: manage agent tokens")
    p.add_argument("token_action", nargs="?", choices=["add", "list", "revoke"],
                   help="token add NAME [--tools a,b]: a new token, printed once; list; revoke NAME")
    p.add_argument("name", nargs="?", help="token add / revoke: the agent id")
    p.add_argument("--tools", help="token add: the tools this agent may call, comma-separated (default *: all)")
    p.add_argument("--tenant", help="token add: whose keys and results its actions are (default: a tenant of its "
                                    "own, named after the agent; agents that are one caller share one)")
    p.add_argument("--tokens", help="the agent tokens file (default RUNONCE_HOME/gateway.tokens; hashes only)")
    p.add_argument("--port", type=int, default=8765, help="serve: the port (default 8765)")
    p.add_argument("--host", default="127.0.0.1", help="serve: the address to listen on")
    p.add_argument("--timeout-s", type=float, default=30.0,
                   help="serve: how long a call waits for its outcome by default (then 'pending'; retrying is safe)")
    p.add_argument("--max-wait-s", type=float, default=60.0, help="serve: the largest ?wait= a caller may ask")
    p.add_argument("--held-retry-after-s", type=int, default=60,
                   help="serve: the Retry-After of an action held for a person's approval (default 60: approvals "
                        "take minutes, not a second); a held call is answered as soon as it is held")
