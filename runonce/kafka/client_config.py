"""Your Kafka's client settings, the same for every process (worker, executors, SDK, gateway,
CLI, approvals, both runtimes, the test readers): librdkafka keys merged into every client's
configuration.

- ``RUNONCE_KAFKA_CONFIG`` names a properties file: one ``key=value`` a line, ``#`` comments;
- ``RUNONCE_KAFKA_CONFIG_<KEY>`` sets one key, as Kafka's own images do: ``_`` is ``.``, ``__``
  is ``_`` (``RUNONCE_KAFKA_CONFIG_SECURITY_PROTOCOL=SASL_SSL``); it overrides the file;
- ``RUNONCE_KAFKA_CONFIG_<KEY>_FILE`` reads that key's value from a file (``..._SASL_PASSWORD_FILE``),
  so a secret stays out of ``ps`` and out of the properties file.

Keys that runonce sets for its guarantees (read_committed, transactions, idempotence, where a
consumer starts) are refused by name: a client setting must not undo exactly once. Secret
values never appear in ``repr``, ``str`` or an error."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from runonce.errors import ConfigError

ENV_FILE = "RUNONCE_KAFKA_CONFIG"
ENV_PREFIX = "RUNONCE_KAFKA_CONFIG_"

#: what each supported security setting may be (librdkafka's names)
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: the keys whose values are secrets: never shown
SECRET_KEYS = frozenset({"sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret",
                         "ssl.keystore.password", "ssl.key.pem"})

#: keys runonce sets itself, for its guarantees: refused, by name
OWNED_KEYS = {
    "group.id": "each process names its own group",
    "enable.auto.commit": "offsets commit inside transactions (KIP-447)",
    "isolation.level": "runonce reads read_committed",
    "transactional.id": "each worker and executor has its own, fenced",
    "enable.idempotence": "producers are idempotent",
    "acks": "runonce writes with acks=all",
    "auto.offset.reset": "runonce decides where a consumer starts (positions.py)",
    "partitioner": "murmur2_random, the same partition as Java and faust",
    "transaction.timeout.ms": "set per process from its settings",
    "enable.partition.eof": "set per reader",
    # the stream workers take KIP-848's incremental hand-overs; the executors' lease counts on
    # the classic protocol's (docs/kafka.md)
    "group.protocol": "the stream workers' is RUNONCE_GROUP_PROTOCOL; the executors' is classic",
    "partition.assignment.strategy": "set per process (the stream job needs range)",
    "group.remote.assignor": "set per process (the stream job needs range)",
}

#: the supported security keys (others pass through to librdkafka, and faust refuses them)
SECURITY_KEYS = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
})


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """librdkafka settings of the deployment's own (ordered, as read). ``origin`` says where
    each came from, for errors."""

    values: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    origin: str = ""

    def items(self) -> Iterator[tuple[str, str]]:
        return iter(self.values)

    def as_dict(self) -> dict[str, str]:
        return dict(self.values)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.as_dict().get(key, default)

    def __bool__(self) -> bool:
        return bool(self.values)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={'<secret>' if k in SECRET_KEYS else v}" for k, v in self.values)
        return f"ClientConfig({shown})"

    __str__ = __repr__

    @property
    def protocol(self) -> str:
        return self.get("security.protocol", "PLAINTEXT") or "PLAINTEXT"

    @property
    def mechanism(self) -> str | None:
        return self.get("sasl.mechanism") or self.get("sasl.mechanisms")


def env_key(name: str) -> str:
    """``SASL_OAUTHBEARER_CLIENT_ID`` -> ``sasl.oauthbearer.client.id`` (``__`` -> ``_``)."""
    return "_".join(part.replace("_", ".") for part in name.lower().split("__"))


def parse_properties(text: str, origin: str) -> list[tuple[str, str]]:
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{origin}:{n}: expected key=value")
        out.append((key.strip(), value.strip()))
    return out


def _read_secret_file(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {path}: {exc.strerror}") from None


def from_env(env: Mapping[str, str]) -> ClientConfig:
    """The deployment's client settings: the properties file, then the single-key variables."""
    merged: dict[str, tuple[str, str]] = {}
    path = env.get(ENV_FILE)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{ENV_FILE}={path}: {exc.strerror}") from None
        for key, value in parse_properties(text, path):
            merged[key] = (value, path)
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or not env[name]:
            continue
        rest = name[len(ENV_PREFIX):]
        if rest.endswith("_FILE"):
            key = env_key(rest[:-len("_FILE")])
            merged[key] = (_read_secret_file(env[name], name), name)
        else:
            merged[env_key(rest)] = (env[name], name)
    config = ClientConfig(tuple((k, v) for k, (v, _) in merged.items()),
                          ", ".join(sorted({o for _, o in merged.values()})))
    check(config, {k: o for k, (_, o) in merged.items()})
    return config


def check(config: ClientConfig, origins: Mapping[str, str]) -> None:
    for key, _ in config.items():
        if key in OWNED_KEYS:
            raise ConfigError(f"{origins.get(key, 'client config')}: {key} is runonce's own "
                              f"({OWNED_KEYS[key]}); remove it")
    if config.protocol not in PROTOCOLS:
        raise ConfigError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, got {config.protocol!r}")
    mechanism = config.mechanism
    if mechanism is not None and mechanism not in MECHANISMS:
        raise ConfigError(f"sasl.mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
    if mechanism is not None and not config.protocol.startswith("SASL_"):
        raise ConfigError(f"sasl.mechanism {mechanism} needs security.protocol SASL_SSL (or SASL_PLAINTEXT), "
                          f"got {config.protocol}")
    if mechanism == "OAUTHBEARER" and config.get("sasl.oauthbearer.method", "default") == "oidc":
        missing = [k for k in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
                               "sasl.oauthbearer.token.endpoint.url") if not config.get(k)]
        if missing:
            raise ConfigError(f"sasl.oauthbearer.method=oidc needs {', '.join(missing)}")
    for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        where = config.get(key)
        if where and not Path(where).is_file():
            raise ConfigError(f"{origins.get(key, 'client config')}: {key}: no such file: {where}")
    if bool(config.get("ssl.certificate.location")) != bool(config.get("ssl.key.location")):
        raise ConfigError("a client certificate needs both ssl.certificate.location and ssl.key.location")
