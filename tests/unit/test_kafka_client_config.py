"""The deployment's Kafka client settings (RUNONCE_KAFKA_CONFIG, RUNONCE_KAFKA_CONFIG_<KEY>):
read once, merged into every client runonce builds, translated for faust's aiokafka, refused
by name where they would undo a guarantee or where faust cannot carry them; never printed."""

from __future__ import annotations

import ssl
from pathlib import Path

import faust
import pytest
import trustme

from runonce.errors import ConfigError
from runonce.kafka import clients
from runonce.kafka.client_config import SECURITY_KEYS, env_key, from_env
from runonce.settings import Settings
from runonce.streams.faust_runtime import kafka_config

PLANTED_PASSWORD = "scram-pw-4b1d6c0e9f"
PLANTED_SECRET = "oidc-secret-77aa01"


@pytest.fixture()
def tls_files(tmp_path: Path) -> dict[str, str]:
    ca = trustme.CA()
    client = ca.issue_cert("agent-worker")
    files = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "client.pem", "key": tmp_path / "client.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    client.cert_chain_pems[0].write_to_path(str(files["cert"]))
    client.private_key_pem.write_to_path(str(files["key"]))
    return {k: str(v) for k, v in files.items()}


def test_env_names_map_to_librdkafka_keys_as_kafkas_images_do() -> None:
    assert env_key("SECURITY_PROTOCOL") == "security.protocol"
    assert env_key("SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL") == "sasl.oauthbearer.token.endpoint.url"
    assert env_key("SOME__UNDERSCORED_KEY") == "some_underscored.key"


def test_the_file_then_single_keys_then_files_for_secrets_reach_every_client(tmp_path: Path,
                                                                            tls_files: dict[str, str]) -> None:
    props = tmp_path / "client.properties"
    props.write_text(f"# Confluent-Cloud-like\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                     f"ssl.ca.location={tls_files['ca']}\nsasl.username=file-user\n")
    secret = tmp_path / "pw"
    secret.write_text(PLANTED_PASSWORD + "\n")
    settings = Settings.from_env({"RUNONCE_KAFKA_CONFIG": str(props), "RUNONCE_BOOTSTRAP": "b:9093",
                                  "RUNONCE_KAFKA_CONFIG_SASL_MECHANISM": "SCRAM-SHA-512",
                                  "RUNONCE_KAFKA_CONFIG_SASL_PASSWORD_FILE": str(secret)})
    config = clients.producer_config(settings.kafka_access())
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["sasl.username"] == "file-user" and config["sasl.password"] == PLANTED_PASSWORD
    assert config["ssl.ca.location"] == tls_files["ca"] and config["acks"] == "all"
    for shown in (repr(settings), str(settings.kafka_access()), repr(settings.kafka_access()),
                  repr(settings.kafka_config)):
        assert PLANTED_PASSWORD not in shown


def test_a_components_principal_keeps_the_deployments_tls_and_mechanism(tls_files: dict[str, str]) -> None:
    settings = Settings.from_env({"RUNONCE_BOOTSTRAP": "b:9093", "RUNONCE_KAFKA_CONFIG_SECURITY_PROTOCOL": "SSL",
                                  "RUNONCE_KAFKA_CONFIG_SSL_CA_LOCATION": tls_files["ca"],
                                  "RUNONCE_SASL_MECHANISM": "SCRAM-SHA-256",
                                  "RUNONCE_SASL_USERNAME": "executor", "RUNONCE_SASL_PASSWORD": PLANTED_PASSWORD})
    config = settings.kafka_access().librdkafka()
    assert (config["security.protocol"], config["sasl.mechanism"], config["sasl.username"]) == (
        "SASL_SSL", "SCRAM-SHA-256", "executor")
    assert "sasl.mechanisms" not in config


@pytest.mark.parametrize("env, error", [
    ({"RUNONCE_KAFKA_CONFIG_ISOLATION_LEVEL": "read_uncommitted"}, "isolation.level is runonce's own"),
    ({"RUNONCE_KAFKA_CONFIG_ENABLE_AUTO_COMMIT": "true"}, "enable.auto.commit is runonce's own"),
    ({"RUNONCE_KAFKA_CONFIG_GROUP_PROTOCOL": "consumer"}, "group.protocol is runonce's own"),
    ({"RUNONCE_KAFKA_CONFIG_SECURITY_PROTOCOL": "TLS"}, "security.protocol must be one of"),
    ({"RUNONCE_KAFKA_CONFIG_SECURITY_PROTOCOL": "SASL_SSL", "RUNONCE_KAFKA_CONFIG_SASL_MECHANISM": "GSSAPI"},
     "sasl.mechanism must be one of"),
    ({"RUNONCE_KAFKA_CONFIG_SASL_MECHANISM": "PLAIN"}, "needs security.protocol SASL_SSL"),
    ({"RUNONCE_KAFKA_CONFIG_SECURITY_PROTOCOL": "SASL_SSL", "RUNONCE_KAFKA_CONFIG_SASL_MECHANISM": "OAUTHBEARER",
      "RUNONCE_KAFKA_CONFIG_SASL_OAUTHBEARER_METHOD": "oidc"}, "oidc needs sasl.oauthbearer.client.id"),
    ({"RUNONCE_KAFKA_CONFIG_SSL_CA_LOCATION": "/nowhere/ca.pem"}, "no such file"),
    ({"RUNONCE_KAFKA_CONFIG_SASL_PASSWORD_FILE": "/nowhere/pw"}, "cannot read /nowhere/pw"),
])
def test_a_setting_that_would_undo_a_guarantee_or_cannot_work_is_refused_by_name(env: dict[str, str],
                                                                                  error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        from_env(env)


def test_faust_translation_carries_every_supported_key(tls_files: dict[str, str]) -> None:
    """Every supported key in one configuration: none refused, and each one changes what aiokafka
    gets (the CA, the client certificate, the host name check, the mechanism, the principal)."""
    every = {"RUNONCE_BOOTSTRAP": "b:9093",
             "RUNONCE_KAFKA_CONFIG_SECURITY_PROTOCOL": "SASL_SSL",
             "RUNONCE_KAFKA_CONFIG_SASL_MECHANISM": "SCRAM-SHA-512",
             "RUNONCE_KAFKA_CONFIG_SASL_MECHANISMS": "SCRAM-SHA-512",
             "RUNONCE_KAFKA_CONFIG_SASL_USERNAME": "worker", "RUNONCE_KAFKA_CONFIG_SASL_PASSWORD": PLANTED_PASSWORD,
             "RUNONCE_KAFKA_CONFIG_SSL_CA_LOCATION": tls_files["ca"],
             "RUNONCE_KAFKA_CONFIG_SSL_CERTIFICATE_LOCATION": tls_files["cert"],
             "RUNONCE_KAFKA_CONFIG_SSL_KEY_LOCATION": tls_files["key"],
             "RUNONCE_KAFKA_CONFIG_SSL_KEY_PASSWORD": "",
             "RUNONCE_KAFKA_CONFIG_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "none",
             "RUNONCE_KAFKA_CONFIG_SASL_OAUTHBEARER_METHOD": "oidc",
             "RUNONCE_KAFKA_CONFIG_SASL_OAUTHBEARER_CLIENT_ID": "runonce",
             "RUNONCE_KAFKA_CONFIG_SASL_OAUTHBEARER_CLIENT_SECRET": PLANTED_SECRET,
             "RUNONCE_KAFKA_CONFIG_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL": "https://idp.example/token",
             "RUNONCE_KAFKA_CONFIG_SASL_OAUTHBEARER_SCOPE": "kafka"}
    settings = Settings.from_env(every)
    given = {k for k, _ in settings.kafka_config.items()} | {"ssl.key.password"}  # empty: not set
    assert given == SECURITY_KEYS == kafka_config.TRANSLATED
    creds = kafka_config.credentials(settings.kafka_access())
    assert isinstance(creds, faust.SASLCredentials)
    assert (creds.mechanism.value, creds.username, creds.password) == ("SCRAM-SHA-512", "worker", PLANTED_PASSWORD)
    context = creds.ssl_context
    assert context is not None and context.verify_mode is ssl.CERT_REQUIRED and not context.check_hostname
    assert any("trustme" in str(c["subject"]) for c in context.get_ca_certs())  # the deployment's CA
    oauth = kafka_config.credentials(Settings.from_env(
        {**every, "RUNONCE_KAFKA_CONFIG_SASL_MECHANISM": "OAUTHBEARER",
         "RUNONCE_KAFKA_CONFIG_SASL_MECHANISMS": "OAUTHBEARER"}).kafka_access())
    assert isinstance(oauth, faust.OAuthCredentials) and oauth.ssl_context is not None
    assert oauth.oauth_cb.endpoint == "https://idp.example/token"
    mtls = kafka_config.credentials(Settings.from_env(
        {"RUNONCE_BOOTSTRAP": "b:9093", "RUNONCE_KAFKA_CONFIG_SECURITY_PROTOCOL": "SSL",
         "RUNONCE_KAFKA_CONFIG_SSL_CA_LOCATION": tls_files["ca"],
         "RUNONCE_KAFKA_CONFIG_SSL_CERTIFICATE_LOCATION": tls_files["cert"],
         "RUNONCE_KAFKA_CONFIG_SSL_KEY_LOCATION": tls_files["key"]}).kafka_access())
    assert isinstance(mtls, faust.SSLCredentials) and mtls.context.check_hostname


def test_faust_refuses_a_key_it_cannot_carry_by_name() -> None:
    settings = Settings.from_env({"RUNONCE_BOOTSTRAP": "b:9093", "RUNONCE_KAFKA_CONFIG_SOCKET_KEEPALIVE_ENABLE": "true"})
    assert clients.base_config(settings.kafka_access())["socket.keepalive.enable"] == "true"  # librdkafka takes it
    with pytest.raises(ConfigError, match="cannot apply the Kafka client setting 'socket.keepalive.enable'"):
        kafka_config.credentials(settings.kafka_access())


#: every key runonce sets itself, written out here (not read from OWNED_KEYS): a key dropped from
#: the owned set would pass a user's value to librdkafka
RUNONCE_OWNS = ("group.id", "enable.auto.commit", "isolation.level", "transactional.id", "enable.idempotence",
                "acks", "auto.offset.reset", "partitioner", "transaction.timeout.ms", "enable.partition.eof",
                "group.protocol", "partition.assignment.strategy")


@pytest.mark.parametrize("key", RUNONCE_OWNS)
def test_every_key_runonce_owns_is_refused_naming_the_file_it_came_from(tmp_path: Path, key: str) -> None:
    """Catches any key removed from OWNED_KEYS (enable.idempotence, transactional.id: the SDK's
    plain producer would take a user's transactional.id)."""
    properties = tmp_path / "client.properties"
    properties.write_text(f"security.protocol=PLAINTEXT\n{key}=x\n")
    with pytest.raises(ConfigError, match=f"{properties}: {key} is runonce's own"):
        from_env({"RUNONCE_KAFKA_CONFIG": str(properties)})


def test_a_missing_tls_file_names_the_properties_file_that_named_it(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SSL\nssl.ca.location=/nowhere/ca.pem\n")
    with pytest.raises(ConfigError, match=f"^{properties}: ssl.ca.location: no such file: /nowhere/ca.pem$"):
        from_env({"RUNONCE_KAFKA_CONFIG": str(properties)})
