"""The README's "try it by hand" block runs as written: `runonce up` in a home of its own (its
own broker, sandbox vendors and executors), then each line as a person would type it, from the
checkout. A person reads `tail results` and runs it again until the charge has its outcome;
so does this test (a bounded number of times). Catches: a README command that fails (an option
renamed, `jq` fed something that is not JSON), and a README whose commands no longer show what
it says they show (the charge's ATTEMPTING, then SUCCEEDED)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def readme_block() -> list[str]:
    """The lines of the README's bash block that starts with `runonce up`."""
    blocks = re.findall(r"^```bash\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.S | re.M)
    (block,) = [b for b in blocks if b.startswith(".venv/bin/runonce up")]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readmes_try_it_block_runs_as_written(tmp_path: Path) -> None:
    env = {**os.environ, "RUNONCE_HOME": str(tmp_path / "home")}
    for name in ("RUNONCE_BOOTSTRAP", "RUNONCE_CONNECTORS"):  # the suite's own: the README's reader has none
        env.pop(name, None)

    def run(line: str) -> str:
        done = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        return done.stdout

    lines = readme_block()
    assert lines[0].startswith(".venv/bin/runonce up") and any("submit charge_payment" in ln for ln in lines)
    try:
        for line in lines:
            out = run(line)
            if "tail results" in line:
                for _ in range(30):  # read again, as a person would, until the outcome is there
                    if "SUCCEEDED" in out:
                        break
                    time.sleep(1)
                    out = run(line)
                assert "ATTEMPTING" in out and "SUCCEEDED" in out, out
    finally:
        subprocess.run([str(ROOT / ".venv/bin/runonce"), "down"], env=env, capture_output=True, timeout=120)
