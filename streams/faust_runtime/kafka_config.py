"""The deployment's Kafka client settings (librdkafka keys, runonce/kafka/client_config.py),
translated for faust's client, aiokafka, in this one place. A key this cannot translate is
refused at start, by name: faust must never connect with less security than the settings ask.

    security.protocol                 which credentials object (none, SSL, SASL, OAuth)
    sasl.mechanism(s)                 SASLCredentials' mechanism (PLAIN, SCRAM-SHA-256/512)
    sasl.username, sasl.password      SASLCredentials (a component's principal overrides them)
    ssl.ca.location                   the SSL context's CA file
    ssl.certificate.location,
    ssl.key.location, ssl.key.password  the context's client certificate (mTLS)
    ssl.endpoint.identification.algorithm   https (default): check the host name; none: do not
    sasl.oauthbearer.method=oidc,
    sasl.oauthbearer.client.id/.client.secret/.token.endpoint.url/.scope
                                      an OAuth client-credentials token provider, as librdkafka's
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import urllib.parse
import urllib.request

import faust
from aiokafka.conn import AbstractTokenProvider  # type: ignore[import-untyped]

from runonce.errors import ConfigError
from runonce.kafka.access import KafkaAccess
from runonce.kafka.client_config import ClientConfig

#: every key ``credentials`` reads; the unit test checks it equals client_config.SECURITY_KEYS
TRANSLATED = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope",
})


class OidcTokens(AbstractTokenProvider):  # type: ignore[misc]
    """OAuth 2.0 client credentials, as librdkafka's ``sasl.oauthbearer.method=oidc`` asks for
    them (Basic auth with the client id and secret); a token is reused until 30 s before it expires."""

    def __init__(self, endpoint: str, client_id: str, client_secret: str, scope: str | None,
                 context: ssl.SSLContext | None) -> None:
        self.endpoint, self.scope, self.context = endpoint, scope, context
        self._basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        self._token: str | None = None
        self._expires_at = 0.0

    def fetch(self) -> str:
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        request = urllib.request.Request(self.endpoint, data=urllib.parse.urlencode(form).encode(), headers={
            "Authorization": f"Basic {self._basic}", "Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(request, timeout=10, context=self.context) as resp:
            answer = json.load(resp)
        self._token = str(answer["access_token"])
        self._expires_at = time.monotonic() + float(answer.get("expires_in", 300)) - 30
        return self._token

    async def token(self) -> str:
        if self._token is not None and time.monotonic() < self._expires_at:
            return self._token
        return await asyncio.to_thread(self.fetch)


def ssl_context(config: ClientConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.get("ssl.ca.location"))
    if config.get("ssl.endpoint.identification.algorithm", "https") == "none":
        context.check_hostname = False
    cert, key = config.get("ssl.certificate.location"), config.get("ssl.key.location")
    if cert and key:
        context.load_cert_chain(cert, key, password=config.get("ssl.key.password"))
    return context


def credentials(access: KafkaAccess) -> faust.auth.Credentials | None:
    """faust's ``broker_credentials`` for these settings; a key it cannot carry is refused."""
    config = access.config
    unknown = sorted(k for k, _ in config.items() if k not in TRANSLATED)
    if unknown:
        raise ConfigError(f"--runtime faust cannot apply the Kafka client setting {unknown[0]!r} "
                          f"(aiokafka has no such setting here); it applies {', '.join(sorted(TRANSLATED))}. "
                          f"Remove it, or run the default runtime")
    protocol = config.protocol
    if access.secured and not protocol.startswith("SASL_"):
        protocol = "SASL_SSL" if protocol == "SSL" else "SASL_PLAINTEXT"
    context = ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
    if protocol == "PLAINTEXT":
        return None
    if protocol == "SSL":
        return faust.SSLCredentials(context)
    mechanism = access.sasl_mechanism
    if mechanism == "OAUTHBEARER":
        if config.get("sasl.oauthbearer.method", "default") != "oidc":
            raise ConfigError("--runtime faust speaks OAUTHBEARER only with sasl.oauthbearer.method=oidc")
        return faust.OAuthCredentials(oauth_cb=OidcTokens(
            config.get("sasl.oauthbearer.token.endpoint.url") or "", config.get("sasl.oauthbearer.client.id") or "",
            config.get("sasl.oauthbearer.client.secret") or "", config.get("sasl.oauthbearer.scope"), None),
            ssl_context=context)
    username = access.username or config.get("sasl.username")
    password = access.password if access.secured else config.get("sasl.password")
    return faust.SASLCredentials(username=username, password=password, ssl_context=context, mechanism=mechanism)
