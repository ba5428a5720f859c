"""``runonce submit`` (publish one action, as an agent would) and ``approvals`` (people's yes
or no on held actions, and the approvals page)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from runonce.errors import ConfigError
from runonce.ops.commands import Adder, say
from runonce.settings import Settings


def cmd_submit(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.sdk.submit import Submitter

    try:
        params = json.loads(args.params)
    except ValueError as exc:
        say(f"--params is not JSON: {exc}")
        return 2
    with Submitter(settings.kafka_access(), agent_id=args.agent) as sub:
        action_id = sub.submit(args.tool, params, idempotency_key=args.key, natural_id=args.natural_id)
    print(action_id)
    return 0


#: the approvals page's port unless ``--port`` names another
DEFAULT_PAGE_PORT = 8470


def _page_url_file(settings: Settings) -> Path:
    return settings.home / "approvals-page.url"


def _page_url(settings: Settings, args: argparse.Namespace) -> str:
    """Where a sign-in link points: ``--host``/``--port`` when given, else the page this home
    serves (or served last), else the default port."""
    if args.port is None:
        try:
            return _page_url_file(settings).read_text().strip().rstrip("/")
        except FileNotFoundError:
            pass
    return f"http://{args.host}:{args.port or DEFAULT_PAGE_PORT}"


def cmd_approvals(settings: Settings, args: argparse.Namespace) -> int:
    import getpass
    import json

    from runonce import tokens
    from runonce.approvals.client import Approvals
    from runonce.approvals.page import ApprovalsPage
    from runonce.core.approval import HoldStatus, Verdict

    tokens_file = Path(args.tokens) if args.tokens else settings.home / "approvers.tokens"
    if args.action == "token":
        if not args.action_id:
            raise ConfigError("runonce approvals token NAME: name the approver")
        if args.revoke:
            found = tokens.revoke(tokens_file, args.action_id)
            print(f"{args.action_id}: token revoked" if found else f"{args.action_id} has no token in {tokens_file}")
            return 0 if found else 1
        token = tokens.add(tokens_file, args.action_id)
        print(f"token for {args.action_id} (shown once; its hash is in {tokens_file}): {token}")
        print(f"sign-in link: {_page_url(settings, args)}/?token={token}")
        return 0
    access = settings.kafka_access()
    approver = args.approver or (access.username if access.secured else None) or getpass.getuser()
    with Approvals(access, approver) as approvals:
        if args.action == "serve":
            page = ApprovalsPage(approvals, tokens_file, args.host, args.port or DEFAULT_PAGE_PORT)
            _page_url_file(settings).write_text(page.url)  # the address `approvals token` links to
            say(f"approvals page on {page.url} (approvers sign in with `runonce approvals token NAME`'s link)")
            try:
                page.serve_forever()
            except KeyboardInterrupt:
                pass
            finally:
                page.close()
            return 0
        if args.action == "list":
            held = [h for h in approvals.held() if args.all or h.status is HoldStatus.HELD]
            now_ms = int(time.time() * 1000)
            for h in held:
                if args.json:
                    print(json.dumps({"action_id": h.action_id, "tool": h.tool, "params": h.params, "agent": h.agent_id,
                                      "why": h.why, "held_at_ms": h.held_at_ms, "expires_at_ms": h.expires_at_ms,
                                      "status": h.status.value, "decided_by": h.decided_by}))
                else:
                    left_s = max(0, (h.expires_at_ms - now_ms) // 1000)
                    print(f"{h.action_id}  {h.tool:<22} {h.status.value:<8} {h.why}  agent {h.agent_id}"
                          + (f"  expires in {left_s // 3600}h{left_s % 3600 // 60:02d}m" if h.status is HoldStatus.HELD
                             else f"  by {h.decided_by}"))
            if not held and not args.json:
                print("nothing is held" if not args.all else "nothing was ever held")
            return 0
        if not args.action_id:
            raise ConfigError(f"runonce approvals {args.action} ACTION_ID: name the held action")
        if args.action == "show":
            h = approvals.get(args.action_id)
            print(f"{h.action_id}  {h.tool}  {h.status.value}" + (f" by {h.decided_by}" if h.decided_by else ""))
            print(f"  params {json.dumps(h.params, ensure_ascii=False)}\n  agent {h.agent_id}\n  why {h.why}")
            for v in h.verdicts:
                print(f"  {v.approver}: {v.verdict or 'expiry'} -> {v.change}" + (f" ({v.note})" if v.note else ""))
            return 0
        seen = approvals.verdict(args.action_id, Verdict(args.action), args.reason)
        if seen.change == "none":
            print(f"{args.action}: changed nothing: {seen.note}")
            return 3
        print(f"{args.action}: {seen.change}d by {approver}" if seen.change != "deny" else f"deny: denied by {approver}")
        return 0


def add_commands(add: Adder) -> None:
    p = add("submit", cmd_submit, "Publish one action to actions.requested; prints its action id.")
    p.add_argument("tool", help="tool name, e.g. send_email")
    p.add_argument("--params", default="{}", help="the tool's arguments as a JSON object")
    p.add_argument("--key", help="idempotency key (retries of one logical action reuse it)")
    p.add_argument("--natural-id", help="business identifier for write-once tools")
    p.add_argument("--agent", default="cli", help="agent id")
    p = add("approvals", cmd_approvals, "People's yes or no on held actions (a policy's approval rule): list "
                                        "them, approve or deny one, or serve the approvals page.")
    p.add_argument("action", choices=["list", "show", "approve", "deny", "serve", "token"],
                   help="list: what is held (--all: and decided); show ID: one and its verdicts; approve ID / "
                        "deny ID: your verdict, and what it did (exit 3: it changed nothing, e.g. someone "
                        "decided first); serve: the approvals page; token NAME: a sign-in link for an approver")
    p.add_argument("action_id", nargs="?", metavar="ID", help="the held action's id (token: the approver's name)")
    p.add_argument("--reason", default="", help="approve / deny: why, recorded with the verdict")
    p.add_argument("--as", dest="approver", help="the name on your verdicts (default: the secured principal, "
                                                 "else your login)")
    p.add_argument("--all", action="store_true", help="list: decided ones too")
    p.add_argument("--json", action="store_true", help="list: one JSON object per line")
    p.add_argument("--host", default="127.0.0.1", help="serve: address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help=f"serve: port (default {DEFAULT_PAGE_PORT}); token: the port of the link "
                                            "(default: the page this RUNONCE_HOME serves)")
    p.add_argument("--tokens", help="serve / token: the approvers' tokens file (default RUNONCE_HOME/approvers.tokens)")
    p.add_argument("--revoke", action="store_true", help="token NAME --revoke: the approver's link stops working")
