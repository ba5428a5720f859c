"""What every ``runonce`` command module shares: how a command is added to the parser, the
log levels, the one way to talk to the person at the terminal, instance names, broker times."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
from typing import Callable

from runonce.errors import ConfigError
from runonce.settings import Settings

#: a command: the settings and the parsed flags in, the exit status out
Command = Callable[[Settings, argparse.Namespace], int]
#: adds a command to ``runonce``'s parser (name, what runs, its help) and returns its own parser
Adder = Callable[[str, Command, str], argparse.ArgumentParser]

LEVELS = {"crit": logging.CRITICAL, "error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO,
          "debug": logging.DEBUG}


def say(msg: str) -> None:
    """Progress and errors, on stderr (stdout is the command's answer)."""
    print(f"runonce: {msg}", file=sys.stderr, flush=True)


HOST = "@host"
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def instance_name(given: str, kind: str) -> str:
    """A worker's name or an executor's slot; ``@host`` takes the host's name, so replicas of
    one compose service (or pods of a StatefulSet) each get their own. The name becomes a
    folder and a transactional.id: letters, digits, ``-_.`` only."""
    import socket

    name = socket.gethostname() if given == HOST else given
    if not name or set(name) - _NAME_CHARS:
        raise ConfigError(f"{kind} name {name!r}: use letters, digits and -_. only")
    return name


def broker_time_ms(value: str, now_ms: int) -> int:
    """``--since``/``--until``: an ISO 8601 time (UTC unless it says otherwise) or a duration
    ago ("15m", "2h", "7d")."""
    from runonce.core.policy import parse_duration_ms

    try:
        return now_ms - parse_duration_ms(value, "time")
    except ConfigError:
        pass
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"expected an ISO time (2026-11-30T14:00:00Z) or a duration ago "
                          f"(15m, 2h, 7d), got {value!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)
