"""A secured broker for this folder: SASL/PLAIN on every listener (the controller's too),
StandardAuthorizer, deny by default, and the ACLs of runonce/kafka/acls.toml.

scripts/test.sh runs this folder as a pytest session of its own, so each session still
runs exactly one broker. Here ``broker`` is the admin principal's settings; every
component under test connects with its own principal from ``cluster.env(name)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from runonce.devbroker.broker import Broker
from runonce.devbroker.users import write_users
from runonce.kafka import acls, topics
from runonce.kafka.access import KafkaAccess
from runonce.kafka.topics import create_topics
from runonce.settings import Settings


@dataclass(frozen=True)
class SecuredCluster:
    admin: Settings
    users: dict[str, str]
    secrets: Path

    def access(self, name: str, password: str | None = None) -> KafkaAccess:
        return KafkaAccess(self.admin.bootstrap_servers(), name, password or self.users[name])

    def env(self, name: str) -> dict[str, str]:
        """A component's environment: its username, and its password in a file (not on a command line)."""
        return {"RUNONCE_SASL_USERNAME": name, "RUNONCE_SASL_PASSWORD_FILE": str(self.secrets / name)}


@pytest.fixture(scope="session")
def cluster(base_settings: Settings) -> Iterator[SecuredCluster]:
    users_file = base_settings.home / "users.properties"
    grants = acls.load()
    users = write_users(users_file, acls.principals(grants))
    secrets = base_settings.home / "secrets"
    secrets.mkdir()
    for name, password in users.items():
        (secrets / name).write_text(password + "\n")
    settings = base_settings.with_(broker_users_file=users_file, sasl_username="admin",
                                   sasl_password=users["admin"])
    b = Broker(settings)
    try:
        status = b.start()
        admin = settings.with_(bootstrap=status.bootstrap)
        create_topics(admin.kafka_access(), admin.partitions)
        acls.apply(admin.kafka_access(), grants, prune=True)
        cluster = SecuredCluster(admin, users, secrets)
        acls.wait_until_granted(cluster.access("agent"), topics.REQUESTED)
        yield cluster
    finally:
        b.stop()


@pytest.fixture(scope="session")
def broker(cluster: SecuredCluster) -> Settings:
    return cluster.admin
