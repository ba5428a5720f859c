"""The local broker's SASL users: a ``name=password`` file, and the broker settings it implies.

One file names every principal the broker accepts (``RUNONCE_BROKER_USERS``). ``admin``
is the broker's own identity (broker <-> controller) and its only super user; every
other principal gets exactly the ACLs in ``acls.toml``. Passwords travel over
SASL_PLAINTEXT on 127.0.0.1 here; a deployment on a network uses SASL_SSL.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from runonce.errors import ConfigError
from runonce.kafka.access import KafkaAccess

SUPER_USER = "admin"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_PASSWORD = re.compile(r'^[^"\\\s]+$')  # it is quoted inside a JAAS line


def read_users(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"broker users file {path} cannot be read: {exc}") from exc
    users: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, password = (part.strip() for part in line.partition("="))
        if not sep or not _NAME.match(name) or not _PASSWORD.match(password):
            raise ConfigError(f"{path}:{number}: expected name=password (name of letters, digits, _ . -; "
                              f"password without spaces, quotes or backslashes)")
        users[name] = password
    if SUPER_USER not in users:
        raise ConfigError(f"{path}: no {SUPER_USER}=... line; the broker authenticates to itself as {SUPER_USER}")
    return users


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds passwords), creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def format_users(users: dict[str, str]) -> str:
    return "# runonce broker users: name=password (RUNONCE_BROKER_USERS points here)\n" + "".join(
        f"{name}={password}\n" for name, password in users.items())


def write_users(path: Path, names: list[str]) -> dict[str, str]:
    """A new users file with a random password per name (admin always included); mode 0600."""
    users = {name: secrets.token_hex(16) for name in dict.fromkeys([SUPER_USER, *names])}
    write_private(path, format_users(users))
    return users


def admin_access(bootstrap: str, users: dict[str, str]) -> KafkaAccess:
    return KafkaAccess(bootstrap, SUPER_USER, users[SUPER_USER])


def secured_properties(users: dict[str, str], broker_port: int, controller_port: int) -> dict[str, str]:
    """SASL/PLAIN on every listener (the controller's too), StandardAuthorizer, deny by default."""
    def jaas(accepted: dict[str, str]) -> str:
        entries = " ".join(f'user_{name}="{pw}"' for name, pw in accepted.items())
        return (f"org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{SUPER_USER}" password="{users[SUPER_USER]}" {entries};')

    return {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{broker_port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        # Only the broker itself talks to the controller.
        "listener.name.controller.plain.sasl.jaas.config": jaas({SUPER_USER: users[SUPER_USER]}),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(users),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{SUPER_USER}",
    }
