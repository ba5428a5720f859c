"""Where Kafka is and who is asking: the one object every client config starts from.

A ``KafkaAccess`` carries the bootstrap address, the deployment's client settings
(``RUNONCE_KAFKA_CONFIG``: TLS, SASL mechanism, OIDC; client_config.py) and, on a secured
broker, this component's SASL principal (``RUNONCE_SASL_*``), never from code. ``repr`` and
``str`` never show a password or a key's passphrase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from runonce.kafka.client_config import MECHANISMS, ClientConfig

__all__ = ["MECHANISMS", "KafkaAccess", "KafkaTarget", "as_access"]


@dataclass(frozen=True, slots=True)
class KafkaAccess:
    bootstrap: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    #: None: the client settings' ``sasl.mechanism``, else PLAIN
    mechanism: str | None = None
    config: ClientConfig = field(default_factory=ClientConfig)

    @property
    def secured(self) -> bool:
        return self.username is not None

    @property
    def sasl_mechanism(self) -> str:
        return self.mechanism or self.config.mechanism or "PLAIN"

    def librdkafka(self) -> dict[str, Any]:
        """confluent-kafka (librdkafka) connection settings: the deployment's client settings,
        then this component's principal over them."""
        config: dict[str, Any] = {**self.config.as_dict(), "bootstrap.servers": self.bootstrap}
        if self.secured:
            tls = self.config.protocol in ("SSL", "SASL_SSL")
            config.pop("sasl.mechanisms", None)
            config.update({"security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
                           "sasl.mechanism": self.sasl_mechanism,
                           "sasl.username": self.username, "sasl.password": self.password or ""})
        return config

    def with_config(self, config: ClientConfig) -> KafkaAccess:
        return KafkaAccess(self.bootstrap, self.username, self.password, self.mechanism, config)

    def __str__(self) -> str:
        return f"{self.bootstrap} as {self.username}" if self.secured else self.bootstrap


#: which Kafka to reach, and as whom: a bare bootstrap address (an unsecured broker) or a
#: KafkaAccess (address and principal); what every client helper accepts
KafkaTarget = Union[str, KafkaAccess]


def as_access(bootstrap: KafkaTarget) -> KafkaAccess:
    return bootstrap if isinstance(bootstrap, KafkaAccess) else KafkaAccess(bootstrap)
