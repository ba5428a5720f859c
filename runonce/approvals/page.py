"""``runonce approvals serve``: the approvals page. Server-rendered HTML, one form per held
action, no script and no build step.

Each approver signs in once with the link ``runonce approvals token NAME`` prints
(``/?token=...``: a cookie then names them); a verdict carries that name. Each rendered
form carries a fresh verdict id, so a form sent twice (a double click, a reload that
re-posts) is one verdict. After a verdict the page says what it did: released by you, or
changed nothing because someone else already decided (and who)."""

from __future__ import annotations

import html
import json
import logging
import time
import uuid
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlparse

from runonce import tokens
from runonce.approvals.client import Approvals, HeldAction
from runonce.core.approval import HoldStatus, Verdict
from runonce.errors import RunonceError

log = logging.getLogger("runonce.approvals")

COOKIE = "runonce_approver"

_STYLE = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #ddd;padding:.4em;text-align:left;vertical-align:top}
.held{background:#fff8e1}.released{background:#e8f5e9}.denied,.expired{background:#fbe9e7}
.flash{padding:.6em;background:#e3f2fd;margin:1em 0}code{font-size:12px}small{color:#666}"""


def _age(ms: int, now_ms: int) -> str:
    s = max(0, (now_ms - ms) // 1000)
    return f"{s // 3600}h {s % 3600 // 60}m" if s >= 3600 else f"{s // 60}m {s % 60}s"


def render(held: list[HeldAction], approver: str, flash: str, now_ms: int) -> str:
    rows = []
    for h in held:
        history = "".join(
            f"<li data-verdict><b>{html.escape(v.approver)}</b> {html.escape(v.verdict or 'expiry')} → "
            f"{html.escape(v.change)}{(': ' + html.escape(v.note)) if v.note else ''}</li>" for v in h.verdicts)
        if h.status is HoldStatus.HELD:
            action = (f'<form method="post" action="/verdict"><input type="hidden" name="action_id" '
                      f'value="{html.escape(h.action_id)}"><input type="hidden" name="verdict_id" '
                      f'value="{uuid.uuid4()}"><input name="reason" placeholder="reason (optional)">'
                      '<button name="verdict" value="approve">Approve</button>'
                      '<button name="verdict" value="deny">Deny</button></form>')
        else:
            action = f'{h.status.value} by <b data-decided-by>{html.escape(h.decided_by or "?")}</b>'
        rows.append(
            f'<tr class="{h.status.value}" data-action="{html.escape(h.action_id)}" data-status="{h.status.value}">'
            f"<td><code>{html.escape(h.action_id)}</code></td><td>{html.escape(h.tool)}</td>"
            f"<td><code>{html.escape(json.dumps(h.params, ensure_ascii=False)[:400])}</code></td>"
            f"<td>{html.escape(h.agent_id)}</td><td>{html.escape(h.why)}</td>"
            f"<td>{_age(h.held_at_ms, now_ms)}</td>"
            f"<td>{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(h.expires_at_ms / 1000))}</td>"
            f"<td>{action}<ul>{history}</ul></td></tr>")
    body = "".join(rows) or '<tr><td colspan="8">Nothing is held.</td></tr>'
    note = f'<div class="flash" data-flash>{html.escape(flash)}</div>' if flash else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>runonce approvals</title>"
            f"<style>{_STYLE}</style></head><body><h1>Held actions</h1>"
            f"<p>Signed in as <b data-approver>{html.escape(approver)}</b>. A held action runs once it is "
            f"approved, whoever approves it and however often.</p>{note}"
            "<table><tr><th>Action</th><th>Tool</th><th>Params</th><th>Agent</th><th>Why held</th><th>Age</th>"
            f"<th>Expires</th><th>Decision</th></tr>{body}</table></body></html>")


class ApprovalsPage:
    def __init__(self, approvals: Approvals, tokens_file: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.approvals = approvals
        self.tokens_file = tokens_file
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:  # the query holds tokens: log no URLs
                log.debug("approvals page: %s", self.command)

            def do_GET(self) -> None:
                page.get(self)

            def do_POST(self) -> None:
                page.post(self)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve_forever(self) -> None:
        self.server.serve_forever(poll_interval=0.2)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- requests -------------------------------------------------------------------------
    def _approver(self, req: BaseHTTPRequestHandler) -> str | None:
        cookie = SimpleCookie(req.headers.get("Cookie", ""))
        morsel = cookie.get(COOKIE)
        holder = tokens.who(self.tokens_file, morsel.value) if morsel is not None else None
        return holder.name if holder is not None else None

    def _send(self, req: BaseHTTPRequestHandler, status: HTTPStatus, body: str,
              headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        req.send_response(status)
        req.send_header("Content-Type", "text/html; charset=utf-8")
        req.send_header("Content-Length", str(len(data)))
        req.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            req.send_header(name, value)
        req.end_headers()
        req.wfile.write(data)

    def get(self, req: BaseHTTPRequestHandler) -> None:
        query = parse_qs(urlparse(req.path).query)
        if "token" in query:  # sign in: the cookie, then a URL without the token
            token = query["token"][0]
            if tokens.who(self.tokens_file, token) is None:
                self._send(req, HTTPStatus.UNAUTHORIZED, "<p>Unknown or revoked token.</p>")
                return
            self._send(req, HTTPStatus.SEE_OTHER, "", {
                "Location": "/", "Set-Cookie": f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"})
            return
        approver = self._approver(req)
        if approver is None:
            self._send(req, HTTPStatus.UNAUTHORIZED, "<p>Sign in with the link from "
                                                     "<code>runonce approvals token NAME</code>.</p>")
            return
        try:
            held = self.approvals.held()
        except RunonceError as exc:
            self._send(req, HTTPStatus.SERVICE_UNAVAILABLE, f"<p>{html.escape(str(exc))}</p>")
            return
        self._send(req, HTTPStatus.OK, render(held, approver, query.get("msg", [""])[0], int(time.time() * 1000)))

    def post(self, req: BaseHTTPRequestHandler) -> None:
        approver = self._approver(req)
        if approver is None:
            self._send(req, HTTPStatus.UNAUTHORIZED, "<p>Not signed in.</p>")
            return
        length = min(int(req.headers.get("Content-Length") or 0), 64 * 1024)
        form = {k: v[0] for k, v in parse_qs(req.rfile.read(length).decode()).items()}
        try:
            verdict = Verdict(form.get("verdict", ""))
            seen = self.approvals.verdict(form["action_id"], verdict, form.get("reason", ""),
                                          verdict_id=form.get("verdict_id") or None, approver=approver, wait_s=20)
        except (KeyError, ValueError):
            self._send(req, HTTPStatus.BAD_REQUEST, "<p>A verdict needs an action and approve or deny.</p>")
            return
        except RunonceError as exc:
            msg = str(exc)
        else:
            msg = (f"{verdict.value}: {seen.change} by you" if seen.change != "none"
                   else f"{verdict.value}: changed nothing ({seen.note})")
        self._send(req, HTTPStatus.SEE_OTHER, "", {"Location": "/?msg=" + quote(msg)})
