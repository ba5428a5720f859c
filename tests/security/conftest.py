"""A secured broker for this folder, as production runs one: SASL_SSL with SCRAM-SHA-512 on
its client listener, an SSL listener that requires a client certificate (its CN the
principal), a private CA (runonce/devbroker/tls.py), StandardAuthorizer, deny by default, and
the ACLs of runonce/kafka/acls.toml.

scripts/test.sh runs this folder as a pytest session of its own, so each session still
runs exactly one broker. Here ``broker`` is the admin principal's settings; every
component under test connects with its own principal from ``cluster.env(name)``.
"""

from __future__ import annotations

import secrets as secrets_module
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from runonce.devbroker.broker import Broker
from runonce.devbroker.users import client_config, mtls_config, write_users
from runonce.kafka import acls, topics
from runonce.kafka.access import KafkaAccess
from runonce.kafka.client_config import ClientConfig
from runonce.kafka.topics import create_topics
from runonce.settings import Settings
from runonce.testkit.oidc import LocalIdentityProvider, OidcClient


@dataclass(frozen=True)
class SecuredCluster:
    admin: Settings
    users: dict[str, str]
    secrets: Path
    broker: Broker
    identity: LocalIdentityProvider | None = None

    def access(self, name: str, password: str | None = None) -> KafkaAccess:
        """``name`` over SASL_SSL with SCRAM-SHA-512, trusting the broker's CA."""
        return KafkaAccess(self.admin.bootstrap_servers(), name, password or self.users[name], None,
                           client_config(self.broker.pki))

    def mtls(self, name: str) -> KafkaAccess:
        """``name`` over the mTLS listener: its client certificate is its principal, no password."""
        return KafkaAccess(self.broker.mtls_bootstrap(), config=mtls_config(self.broker.pki, name))

    def oidc(self, client_id: str, secret: str | None = None) -> KafkaAccess:
        """A client of the identity provider over SASL_SSL with OAUTHBEARER (librdkafka's OIDC
        client-credentials flow); its token's ``sub`` is its principal."""
        assert self.identity is not None
        return KafkaAccess(self.admin.bootstrap_servers(), config=ClientConfig((
            ("security.protocol", "SASL_SSL"), ("sasl.mechanism", "OAUTHBEARER"), ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.client.id", client_id),
            ("sasl.oauthbearer.client.secret", secret or self.identity.clients[client_id].secret),
            ("sasl.oauthbearer.token.endpoint.url", self.identity.token_endpoint),
            ("ssl.ca.location", str(self.broker.pki.ca))), "the test"))

    def mtls_env(self, name: str) -> dict[str, str]:
        """A component's environment over the mTLS listener: a client properties file naming its
        certificate and key (``RUNONCE_KAFKA_CONFIG``), no password."""
        path = self.secrets / f"{name}.mtls.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in mtls_config(self.broker.pki, name).items()))
        return {"RUNONCE_KAFKA_CONFIG": str(path), "RUNONCE_BOOTSTRAP": self.broker.mtls_bootstrap()}

    def env(self, name: str) -> dict[str, str]:
        """A component's environment: the broker's client settings (TLS, SCRAM, its CA), its
        username, and its password in a file (not on a command line)."""
        return {"RUNONCE_KAFKA_CONFIG": str(self.broker.client_properties),
                "RUNONCE_SASL_USERNAME": name, "RUNONCE_SASL_PASSWORD_FILE": str(self.secrets / name)}


@pytest.fixture(scope="session")
def cluster(base_settings: Settings) -> Iterator[SecuredCluster]:
    users_file = base_settings.home / "users.properties"
    grants = acls.load()
    users = write_users(users_file, acls.principals(grants))
    secrets = base_settings.home / "secrets"
    secrets.mkdir()
    for name, password in users.items():
        (secrets / name).write_text(password + "\n")
    # An OIDC provider of the session's own: the broker checks OAUTHBEARER tokens against its JWKS.
    identity = LocalIdentityProvider([OidcClient("agent-oidc", secrets_module.token_hex(16), "agent")])
    settings = base_settings.with_(broker_users_file=users_file, sasl_username="admin",
                                   sasl_password=users["admin"], broker_oidc_jwks_url=identity.jwks_endpoint,
                                       broker_oidc_issuer=identity.url, broker_oidc_audience=identity.audience)
    b = Broker(settings)
    try:
        status = b.start()
        admin = settings.with_(bootstrap=status.bootstrap, kafka_config=client_config(b.pki))
        create_topics(admin.kafka_access(), admin.partitions)
        acls.apply(admin.kafka_access(), grants, prune=True)
        cluster = SecuredCluster(admin, users, secrets, b, identity)
        acls.wait_until_granted(cluster.access("agent"), topics.REQUESTED)
        yield cluster
    finally:
        b.stop()
        identity.stop()


#: how a test connects as a principal: ``connect("agent")``
Connect = Callable[[str], KafkaAccess]


@pytest.fixture(params=["sasl_ssl-scram", "mtls"])
def connect(request: pytest.FixtureRequest, cluster: SecuredCluster) -> Connect:
    """A principal over SASL_SSL with SCRAM-SHA-512, or over mTLS (its certificate's CN)."""
    return cluster.access if request.param == "sasl_ssl-scram" else cluster.mtls


@dataclass(frozen=True)
class Transport:
    """How every component and client of a test connects as its principal."""
    name: str
    access: Connect
    env: Callable[[str], dict[str, str]]


@pytest.fixture(params=["sasl_ssl-scram", "mtls"])
def transport(request: pytest.FixtureRequest, cluster: SecuredCluster) -> Transport:
    """Processes and clients over SASL_SSL with SCRAM-SHA-512, or over mTLS (each its own certificate)."""
    if request.param == "mtls":
        return Transport("mtls", cluster.mtls, cluster.mtls_env)
    return Transport("sasl_ssl-scram", cluster.access, cluster.env)


@pytest.fixture(scope="session")
def broker(cluster: SecuredCluster) -> Settings:
    return cluster.admin
