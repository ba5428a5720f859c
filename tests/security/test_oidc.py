"""OAUTHBEARER against a real OIDC flow: the test session's identity provider issues RS256 JWTs
(client credentials), the broker checks them against its JWKS with Kafka's own
``OAuthBearerValidatorCallbackHandler``, and the token's ``sub`` is a principal the ACLs apply
to like any other. Both runtimes' clients fetch their tokens the same way: librdkafka's
``sasl.oauthbearer.method=oidc``, and faust's translation (``OidcTokens``)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError

from runonce.kafka import topics
from runonce.sdk.submit import Submitter
from runonce.streams.faust_runtime.kafka_config import OidcTokens
from runonce.testkit.oidc import OIDC_AUDIENCE
from tests.security.conftest import SecuredCluster
from tests.security.test_authorization import _produce, _refusal

pytestmark = pytest.mark.broker


def test_an_oidc_token_is_a_principal_the_acls_apply_to(cluster: SecuredCluster) -> None:
    assert cluster.identity is not None
    before = len(cluster.identity.issued)
    agent = cluster.oidc("agent-oidc")  # sub = agent
    with Submitter(agent, agent_id="oidc-agent") as sub:
        sub.submit("send_email", {"to": "oidc@example.com", "subject": "s"}, idempotency_key="oidc-1")
    assert len(cluster.identity.issued) > before  # the client asked the provider: the token was real
    err = _produce(agent, topics.APPROVED)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # agent's ACLs, no more
    refused = _refusal(cluster.oidc("agent-oidc", secret="not-the-secret"))
    assert "401" in refused or "invalid_client" in refused, refused


def test_fausts_token_provider_gets_the_same_token_the_broker_accepts(cluster: SecuredCluster) -> None:
    assert cluster.identity is not None
    client = cluster.identity.clients["agent-oidc"]
    token = OidcTokens(cluster.identity.token_endpoint, client.client_id, client.secret, "kafka", None).fetch()
    import base64

    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == "agent" and claims["exp"] > claims["iat"]


def test_a_token_minted_for_another_audience_is_refused(cluster: SecuredCluster) -> None:
    """Signed by the same provider, for the same subject, but for another service (its ``aud``
    is not this cluster's): the broker refuses it. A stolen token for another API cannot be
    replayed at Kafka."""
    assert cluster.identity is not None
    cluster.identity.audience = "another-service"
    try:
        refused = _refusal(cluster.oidc("agent-oidc"))
    finally:
        cluster.identity.audience = OIDC_AUDIENCE
    assert "SASL authentication error" in refused and "invalid_token" in refused, refused
