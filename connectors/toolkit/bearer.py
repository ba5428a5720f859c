"""A bearer token, wherever it comes from: the seam the HTTP connectors that send
``Authorization: Bearer`` read it through (a token from the connectors file, a service
account's token file that is rotated in place, an OAuth token google-auth renews)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from runonce.connectors.toolkit.secrets import Secret


class BearerSource(Protocol):
    @property
    def source(self) -> str:
        """Where the credential comes from, for messages (never the credential)."""
        ...

    def bearer(self) -> str:
        """A valid token; raises a ConnectorError when none can be had (nothing was sent)."""
        ...


@dataclass(frozen=True, slots=True)
class StaticBearer:
    """A token given once (the connectors file's secret, a kubeconfig's ``token``)."""

    token: Secret

    @property
    def source(self) -> str:
        return f"token {self.token.source}"

    def bearer(self) -> str:
        return self.token.reveal()
