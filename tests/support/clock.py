"""A test's monotonic time, the one fake clock of the suite: it moves only when the test moves
it (``clock.now += s``), when the code under test sleeps (``clock.sleep``), or by
``per_look_s`` each time the code reads it (a loop that must give up on its own)."""

from __future__ import annotations


class Clock:
    def __init__(self, now: float = 0.0, *, per_look_s: float = 0.0, sleep_zero_ok: bool = True) -> None:
        self.now = now
        self.per_look_s = per_look_s
        #: False: a sleep of 0 s fails the test (a throttle that sleeps 0 s spins)
        self.sleep_zero_ok = sleep_zero_ok

    def __call__(self) -> float:
        self.now += self.per_look_s
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0 or (seconds == 0 and self.sleep_zero_ok), f"slept {seconds} s"
        self.now += seconds
