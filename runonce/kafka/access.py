"""Where Kafka is and who is asking: the one object every client config starts from.

A ``KafkaAccess`` carries the bootstrap address and, on a secured broker, this
component's SASL principal. Credentials come from settings (``RUNONCE_SASL_*``), never
from code; ``repr`` and ``str`` never show the password.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

#: SASL mechanisms the local broker and runonce's clients speak
MECHANISMS = ("PLAIN",)


@dataclass(frozen=True, slots=True)
class KafkaAccess:
    bootstrap: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    mechanism: str = "PLAIN"

    @property
    def secured(self) -> bool:
        return self.username is not None

    def librdkafka(self) -> dict[str, Any]:
        """confluent-kafka (librdkafka) connection settings."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        if self.secured:
            config.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": self.mechanism,
                           "sasl.username": self.username, "sasl.password": self.password or ""})
        return config

    def __str__(self) -> str:
        return f"{self.bootstrap} as {self.username}" if self.secured else self.bootstrap


#: which Kafka to reach, and as whom: a bare bootstrap address (an unsecured broker) or a
#: KafkaAccess (address and principal); what every client helper accepts
KafkaTarget = Union[str, KafkaAccess]


def as_access(bootstrap: KafkaTarget) -> KafkaAccess:
    return bootstrap if isinstance(bootstrap, KafkaAccess) else KafkaAccess(bootstrap)
