"""A headless Chromium session driven over the DevTools protocol (websocket-client), for pages
a person clicks: each ``BrowserSession`` is its own browser process and profile, so two of
them are two people with their own cookies."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

from tests.support.browser import FLAGS, chromium


class BrowserSession:
    def __init__(self) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="runonce-chromium-"))
        self.proc = subprocess.Popen([chromium(), *FLAGS, "--remote-debugging-port=0",
                                      f"--user-data-dir={self.profile}", "--no-first-run", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert self.proc.poll() is None, "chromium exited before it opened its DevTools port"
            assert time.monotonic() < deadline, "chromium opened no DevTools port within 60 s"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        pages = []
        while not pages:
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
            pages = [t for t in targets if t["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self._id = 0
        self.call("Page.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                assert "error" not in msg, msg
                result: dict[str, Any] = msg.get("result", {})
                return result

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_loaded()

    def wait_loaded(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.evaluate("document.readyState") != "complete":
            assert time.monotonic() < deadline, "the page did not load"
            time.sleep(0.05)

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait(10)
            shutil.rmtree(self.profile, ignore_errors=True)
