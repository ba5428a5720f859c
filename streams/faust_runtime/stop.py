"""Stopping a worker without acknowledging the record in hand.

faust acknowledges an event in a ``finally`` clause, so an exception inside an agent
(or a cancellation while it awaits) marks the record done and the next commit skips it.
A worker that cannot finish a record must therefore leave like a SIGKILL: at once, with
nothing acknowledged or committed past the last flush. Its supervisor restarts it and the
record is decided again (harmless by design; tests/integration/test_crash.py).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("runonce.streams")

#: exit status of a worker that stopped rather than skip a record (sysexits EX_SOFTWARE)
EXIT_STOPPED_BEFORE_ACK = 70


def stop_before_ack(reason: str, exc: BaseException | None = None) -> None:
    log.critical("%s; stopping the worker before the record is acknowledged", reason, exc_info=exc)
    logging.shutdown()
    os._exit(EXIT_STOPPED_BEFORE_ACK)
