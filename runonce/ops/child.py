"""A ``runonce`` command run as a child process, said once: the stack, the demo, the tests and
the benches start their workers, executors and CLI calls here.

A child is this interpreter with ``-m runonce`` (never the first ``runonce`` on ``PATH``, which
may be another install), reads nothing from a terminal, and by default leads a session of its
own so that a signal to its group reaches whatever it starts in turn. Its environment is the
caller's to give (``Settings.child_env`` keeps a principal from being handed down).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence


def argv(*args: str, python_flags: Sequence[str] = ()) -> list[str]:
    """The command line of ``runonce ARGS`` in this interpreter (``python_flags`` before ``-m``,
    e.g. a profiler's)."""
    return [sys.executable, *python_flags, "-m", "runonce", *args]


def start(args: Sequence[str], env: Mapping[str, str], log: Path | None, *, own_session: bool = True,
          prefix: Sequence[str] = (), python_flags: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """Starts ``runonce ARGS``, its output and errors appended to ``log`` (dropped when None).
    ``prefix`` is a command that runs it (a supervisor)."""
    command = [*prefix, *argv(*args, python_flags=python_flags)]
    if log is None:
        return subprocess.Popen(command, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=own_session)
    with open(log, "ab") as out:
        return subprocess.Popen(command, env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=own_session)


def run(args: Sequence[str], env: Mapping[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Runs ``runonce ARGS`` to its end; its output and errors as text, its status unchecked."""
    return subprocess.run(argv(*args), env=dict(env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout_s)
