"""Crash tests' failpoints, an observer of the executor's flow rather than a part of it.

``RUNONCE_EXECUTOR_FAILPOINT=POINT[:N]`` SIGKILLs the executor the Nth time it passes POINT (the
first time without N); ``abort_result`` instead writes each record's first result transaction
and aborts it, as a coordinator move or a timeout would at the worst moment;
``stall_before_call:S`` stops the executor for S seconds the first time its intents have
committed, before it calls anyone, as a long GC pause or a frozen VM would: with its link to the
broker cut meanwhile (runonce/testkit/faults.py), it wakes a zombie whose partitions moved. The executor says
where it is (``passing``); without a failpoint every call is a no-op."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Callable

from runonce.connectors.toolkit.base import ActionCall, CommitHook, Connector
from runonce.executor_failpoint import Point, parse_failpoint

log = logging.getLogger("runonce.executor")


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Failpoints:
    def __init__(self, point: Point | None = None, nth: int = 1, kill: Callable[[], None] = _sigkill,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """``nth``: the pass that kills; for ``stall_before_call``, the seconds of the stall."""
        self.point, self.nth, self._kill, self._sleep = point, nth, kill, sleep
        self._passes = 0
        self._lock = threading.Lock()  # vendor calls pass from several threads
        self._aborted: set[bytes | None] = set()

    @classmethod
    def parse(cls, text: str | None) -> Failpoints:
        """From the setting (validated by runonce.settings): ``POINT[:N]``, or None for none."""
        if not text:
            return cls()
        return cls(*parse_failpoint(text))

    def passing(self, where: Point) -> None:
        """The executor is at ``where``: the Nth pass of the configured point is the kill."""
        if self.point is Point.STALL_BEFORE_CALL and where is Point.BEFORE_CALL:
            self._stall()
            return
        if self.point is not where:
            return
        with self._lock:
            self._passes += 1
            if self._passes == self.nth:
                log.warning("failpoint %s (pass %d): SIGKILL", where.value, self._passes)
                self._kill()

    def _stall(self) -> None:
        with self._lock:
            self._passes += 1
            if self._passes != 1:
                return
        log.warning("failpoint stall_before_call: stopped for %d s", self.nth)
        self._sleep(self.nth)
        log.warning("failpoint stall_before_call: going on")

    def aborts(self, key: bytes | None) -> bool:
        """``abort_result``: whether this result transaction (its first record's key) is the one
        to abort: the first of each record only, so its redelivery commits."""
        if self.point is not Point.ABORT_RESULT or key in self._aborted:
            return False
        self._aborted.add(key)
        log.warning("failpoint abort_result: aborting the result of %r", key)
        return True

    def around(self, connector: Connector) -> Connector:
        """The connector the executor calls: for ``before_vendor_commit``, one that passes that
        point inside its own transaction (a ``CommitHook``); else the connector itself."""
        if self.point is Point.BEFORE_VENDOR_COMMIT and isinstance(connector, CommitHook):
            return connector.hooked(self._before_vendor_commit)
        return connector

    def _before_vendor_commit(self, call: ActionCall) -> None:
        self.passing(Point.BEFORE_VENDOR_COMMIT)
