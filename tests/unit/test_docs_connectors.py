"""docs/connectors.md runs as written: its worked example is the plugin package the suite
installs and tests (tests/connector_plugin), word for word, and its replay test, copied into a
file of its own, passes under pytest with nothing but what ``runonce[testing]`` brings.

Catches: the page's example drifting from the package (a missing import, a renamed call), a
fixture the page names that no plugin provides (``email_sandbox``, ``connectors_file`` once),
``sandbox_vendors`` gone from ``runonce.connectors.testing``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "connectors.md"


def python_blocks(page: Path) -> list[str]:
    blocks, current, inside = [], [], False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(current) + "\n")
            inside, current = line == "```python" and not inside, []
        elif inside:
            current.append(line)
    return blocks


def test_the_worked_example_is_the_installed_plugin_word_for_word() -> None:
    plugin = (ROOT / "tests/connector_plugin/runonce_followup/__init__.py").read_text()
    code = plugin[plugin.index("from __future__"):]
    assert code in python_blocks(PAGE), "docs/connectors.md's worked example differs from the plugin package"


def test_the_replay_test_runs_as_written(tmp_path: Path) -> None:
    (block,) = [b for b in python_blocks(PAGE) if b.startswith("# test_followups.py")]
    (tmp_path / "test_followups.py").write_text(block)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_followups.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
