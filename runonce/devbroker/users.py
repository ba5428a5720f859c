"""The local broker's SASL users: a ``name=password`` file, and the broker settings it implies.

One file names every principal the broker accepts (``RUNONCE_BROKER_USERS``). ``admin``
is the broker's own identity (broker <-> controller) and its only super user; every
other principal gets exactly the ACLs in ``acls.toml``. Clients authenticate with
SCRAM-SHA-512 over TLS (SASL_SSL), or with a client certificate (mTLS); no password
crosses a socket in clear.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from runonce.devbroker.tls import Pki
from runonce.errors import ConfigError
from runonce.kafka.access import KafkaAccess
from runonce.kafka.client_config import ClientConfig

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


#: the SCRAM mechanism of the broker's client listener (and of its own inter-broker traffic)
SCRAM = "SCRAM-SHA-512"


def client_config(pki: Pki) -> ClientConfig:
    """What a client of the secured dev broker's SASL_SSL listener sets (the CA it trusts, SCRAM)."""
    return ClientConfig((("security.protocol", "SASL_SSL"), ("sasl.mechanism", SCRAM),
                         ("ssl.ca.location", str(pki.ca))), "the local broker")


def mtls_config(pki: Pki, name: str) -> ClientConfig:
    """A client of the mTLS listener, as principal ``name`` (its certificate's CN)."""
    return ClientConfig((("security.protocol", "SSL"), ("ssl.ca.location", str(pki.ca)),
                         ("ssl.certificate.location", str(pki.client_cert(name))),
                         ("ssl.key.location", str(pki.client_key(name)))), "the local broker")


def admin_access(bootstrap: str, users: dict[str, str], pki: Pki) -> KafkaAccess:
    return KafkaAccess(bootstrap, SUPER_USER, users[SUPER_USER], SCRAM, client_config(pki))


def scram_arguments(users: dict[str, str]) -> list[str]:
    """``kafka-storage format --add-scram`` for every user: the credentials exist before the
    broker's first start (it authenticates to itself with admin's)."""
    out = []
    for name, password in users.items():
        out += ["--add-scram", f"{SCRAM}=[name={name},password={password}]"]
    return out


def oidc_properties(jwks_url: str, issuer: str, audience: str) -> dict[str, str]:
    """OAUTHBEARER beside SCRAM on the SASL_SSL listener: a token from an OIDC provider, checked
    against its JWKS by Kafka's own validator, its ``iss`` the provider's and its ``aud`` this
    cluster's (a token minted for another service is refused; Kafka 4.4's validator will not
    start without both); the token's ``sub`` is the principal."""
    prefix = "listener.name.sasl_ssl.oauthbearer."
    checks = {"sasl.oauthbearer.expected.audience": audience, "sasl.oauthbearer.expected.issuer": issuer}
    return {
        **{f"{prefix}{key}": value for key, value in checks.items()}, **checks,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": f"{SCRAM},OAUTHBEARER",
        f"{prefix}sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        f"{prefix}sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        f"{prefix}sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        "sasl.oauthbearer.jwks.endpoint.url": jwks_url,
    }


def secured_properties(users: dict[str, str], host: str, broker_port: int, controller_port: int, mtls_port: int,
                       pki: Pki) -> dict[str, str]:
    """SASL_SSL with SCRAM-SHA-512 for clients and the broker itself; an SSL listener that requires
    a client certificate, its CN the principal; the controller's listener SASL/PLAIN for admin
    alone (KRaft's controller cannot check SCRAM: the credentials live in the metadata it
    serves). StandardAuthorizer, deny by default."""
    controller_jaas = (f"org.apache.kafka.common.security.plain.PlainLoginModule required "
                       f'username="{SUPER_USER}" password="{users[SUPER_USER]}" '
                       f'user_{SUPER_USER}="{users[SUPER_USER]}";')
    return {
        "listeners": (f"SASL_SSL://{host}:{broker_port},SSL://{host}:{mtls_port},"
                      f"CONTROLLER://127.0.0.1:{controller_port}"),
        "advertised.listeners": f"SASL_SSL://{host}:{broker_port},SSL://{host}:{mtls_port}",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": SCRAM,
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            f"org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SUPER_USER}" password="{users[SUPER_USER]}";'),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": controller_jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{SUPER_USER}",
    }


def upsert_scram(admin: KafkaAccess, users: dict[str, str]) -> None:
    """Every user's SCRAM credential, as admin (users added to the file after the first start
    included); written through the Admin API, so no password is on a command line."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from runonce.errors import BrokerSetupError
    from runonce.kafka.clients import base_config

    client = AdminClient(base_config(admin))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    futures = client.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(name, info, password.encode()) for name, password in users.items()])
    for name, future in futures.items():
        try:
            future.result(30)
        except Exception as exc:  # confluent-kafka raises KafkaException: say which user
            raise BrokerSetupError(f"cannot set the SCRAM credential of {name}: {exc}") from exc
