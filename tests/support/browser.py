"""Debian's headless Chromium, as a reader of the report page would open it (scripts/setup.sh
installs the package): the DOM it built and a screenshot of what it drew."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is missing: scripts/setup.sh installs Debian's chromium package"
    return found


def dump_dom(page: Path) -> str:
    done = subprocess.run([chromium(), *FLAGS, "--dump-dom", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "<body" in done.stdout, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, out: Path, width: int = 960, height: int = 1800) -> bytes:
    done = subprocess.run([chromium(), *FLAGS, f"--screenshot={out}", f"--window-size={width},{height}",
                           page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and out.exists(), done.stderr[-2000:]
    return out.read_bytes()


class PageCounts(HTMLParser):
    """Every ``data-count`` element's name and number in a report page, and any script in it."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}
        self.scripts = 0
        self._open: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        self._open = dict(attrs).get("data-count")

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.counts[self._open] = int(data.replace(",", ""))
            self._open = None
