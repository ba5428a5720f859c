"""What a kubelet does for a container with ``restartPolicy: OnFailure``, for the processes
``runonce up`` starts: run one, and start it again when it exits with a failure (an executor's
"exiting for a restart": rc 75 after a transaction call blocked, rc 2 when its committed
offsets could not be fetched) after a back-off that doubles from 1 s to 60 s and resets once
a run lasted a minute. A SIGTERM to the group (``runonce down``) reaches the child too; the
supervisor then waits for it and never restarts it.

Each exit is a line ``<exit code> <unix ms>`` in ``<pids>/<name>.exits`` (``runonce up`` starts
it empty): ``runonce status`` counts the restarts, and ``runonce up`` tells a process that died
before it was ready.

    python -m runonce.ops.supervise NAME PIDS_DIR -- COMMAND...
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

#: the first wait before a restart, doubled each time, at most the last
BACKOFF_S = (1.0, 60.0)
#: a run this long resets the back-off
STEADY_S = 60.0


def exits_file(pids: Path, name: str) -> Path:
    return pids / f"{name}.exits"


def exits(pids: Path, name: str) -> list[int]:
    """The exit codes of ``name``'s earlier runs under its supervisor, oldest first."""
    try:
        lines = exits_file(pids, name).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [int(line.split()[0]) for line in lines if line.strip()]


def supervise(name: str, pids: Path, argv: list[str]) -> int:
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def on_term(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True  # the group's SIGTERM reached the child as well

    signal.signal(signal.SIGTERM, on_term)
    backoff_s = BACKOFF_S[0]
    while True:
        started = time.monotonic()
        child = subprocess.Popen(argv)
        rc = child.wait()
        with exits_file(pids, name).open("a") as out:
            out.write(f"{rc} {int(time.time() * 1000)}\n")
        if stopping or rc == 0:
            return 0
        if time.monotonic() - started >= STEADY_S:
            backoff_s = BACKOFF_S[0]
        print(f"supervise: {name} exited with {rc}; starting it again in {backoff_s:.0f} s", flush=True)
        deadline = time.monotonic() + backoff_s
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
        if stopping:
            return 0
        backoff_s = min(BACKOFF_S[1], backoff_s * 2)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m runonce.ops.supervise NAME PIDS_DIR -- COMMAND...", file=sys.stderr)
        return 2
    return supervise(argv[0], Path(argv[1]), argv[3:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
