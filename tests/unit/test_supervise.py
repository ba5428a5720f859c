"""``runonce up``'s processes under a supervisor, as a kubelet keeps a container
(``restartPolicy: OnFailure``). Catches: an executor that exited for a restart (rc 75, rc 2)
left down; a process stopped by ``runonce down`` (SIGTERM to its group) started again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runonce.ops.supervise import exits, supervise

#: exits 75 ("for a restart") on its first run, 0 on its second
_FAILS_ONCE = """
import pathlib, sys
marker = pathlib.Path(sys.argv[1])
if not marker.exists():
    marker.write_text("ran")
    sys.exit(75)
"""


def test_a_process_that_exits_for_a_restart_is_started_again(tmp_path: Path) -> None:
    rc = supervise("executor-smtp", tmp_path, [sys.executable, "-c", _FAILS_ONCE, str(tmp_path / "ran")])
    assert rc == 0
    assert exits(tmp_path, "executor-smtp") == [75, 0]


def test_a_sigterm_to_the_group_stops_it_for_good(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "runonce.ops.supervise", "worker", str(tmp_path), "--",
                             sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        time.sleep(1.0)  # both started
        os.killpg(proc.pid, signal.SIGTERM)  # what runonce down does
        assert proc.wait(timeout=20) == 0
        assert exits(tmp_path, "worker") == [-signal.SIGTERM]  # one run, never started again
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
