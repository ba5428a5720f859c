"""An OAuth 2.0 / OIDC identity provider for tests, on loopback: the token endpoint answers
the client-credentials grant (HTTP Basic with a client id and secret, as librdkafka's
``sasl.oauthbearer.method=oidc`` sends it) with a JWT signed RS256, and ``/jwks`` serves the
public key, which the broker's ``OAuthBearerValidatorCallbackHandler`` checks every token
against. A client's ``sub`` claim is its Kafka principal, so the ACLs apply to it as to any
other. Every token request is recorded (``issued``), so a test sees that a client asked."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

#: the audience the dev broker expects by default (RUNONCE_BROKER_OIDC_AUDIENCE)
OIDC_AUDIENCE = "runonce-kafka"

KEY_ID = "runonce-test-key"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(n: int) -> str:
    return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


@dataclass(frozen=True, slots=True)
class OidcClient:
    client_id: str
    secret: str
    #: the token's ``sub``: the Kafka principal
    subject: str


class LocalIdentityProvider:
    def __init__(self, clients: list[OidcClient], lifetime_s: int = 300, audience: str = OIDC_AUDIENCE) -> None:
        self.clients = {c.client_id: c for c in clients}
        #: the ``aud`` of every token it issues: the cluster's (the broker checks it)
        self.audience = audience
        self.lifetime_s = lifetime_s
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.issued: list[str] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/jwks":
                    self._answer(200, {"keys": [provider.jwk()]})
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                client = provider.authenticate(self.headers.get("Authorization", ""))
                if self.path != "/token" or form.get("grant_type") != ["client_credentials"]:
                    self._answer(400, {"error": "unsupported_grant_type"})
                elif client is None:
                    self._answer(401, {"error": "invalid_client"})
                else:
                    provider.issued.append(client.client_id)
                    self._answer(200, {"access_token": provider.token(client, (form.get("scope") or [""])[0]),
                                       "token_type": "Bearer", "expires_in": provider.lifetime_s})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def token_endpoint(self) -> str:
        return f"{self.url}/token"

    @property
    def jwks_endpoint(self) -> str:
        return f"{self.url}/jwks"

    def authenticate(self, header: str) -> OidcClient | None:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
        client = self.clients.get(urllib.parse.unquote(client_id))
        return client if client is not None and client.secret == urllib.parse.unquote(secret) else None

    def jwk(self) -> dict[str, str]:
        numbers = self._key.public_key().public_numbers()
        return {"kty": "RSA", "kid": KEY_ID, "use": "sig", "alg": "RS256", "n": _uint(numbers.n), "e": _uint(numbers.e)}

    def token(self, client: OidcClient, scope: str) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        claims = {"iss": self.url, "sub": client.subject, "aud": self.audience, "iat": now,
                  "exp": now + self.lifetime_s, "scope": scope or "kafka"}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
