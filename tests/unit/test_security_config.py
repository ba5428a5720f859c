"""Credentials come from settings, the users file and the ACL file are checked, and a
password never shows in a repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from runonce.devbroker.tls import Pki
from runonce.devbroker.users import read_users, secured_properties, write_users
from runonce.errors import ConfigError
from runonce.kafka import acls
from runonce.kafka.clients import base_config
from runonce.settings import Settings


def test_sasl_settings_come_from_the_environment_and_reach_every_client(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    s = Settings.from_env({"RUNONCE_BOOTSTRAP": "h:1", "RUNONCE_SASL_USERNAME": "agent",
                           "RUNONCE_SASL_PASSWORD_FILE": str(secret)})
    config = base_config(s.kafka_access())
    assert (config["sasl.username"], config["sasl.password"], config["security.protocol"]) == \
        ("agent", "s3cret", "SASL_PLAINTEXT")
    assert "s3cret" not in repr(s) and "s3cret" not in repr(s.kafka_access()) and "s3cret" not in str(s.kafka_access())
    assert "security.protocol" not in base_config("h:1")  # unsecured broker: no SASL settings


def test_a_username_without_a_password_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="RUNONCE_SASL_PASSWORD"):
        Settings.from_env({"RUNONCE_SASL_USERNAME": "agent"})


def test_users_file_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "users"
    written = write_users(path, ["agent", "stream"])
    assert read_users(path) == written and list(written) == ["admin", "agent", "stream"]
    assert path.stat().st_mode & 0o077 == 0
    (tmp_path / "bad").write_text('admin=ok\nagent=has "quote"\n')
    with pytest.raises(ConfigError, match="bad:2"):
        read_users(tmp_path / "bad")
    (tmp_path / "noadmin").write_text("agent=x\n")
    with pytest.raises(ConfigError, match="no admin"):
        read_users(tmp_path / "noadmin")


def test_secured_broker_properties_cover_every_listener_and_deny_by_default() -> None:
    props = secured_properties({"admin": "a", "agent": "b"}, "127.0.0.1", 9092, 9093, 9094, Pki(Path("/tls")))
    # clients only over TLS: SCRAM on one listener, a client certificate on the other
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SASL_PLAINTEXT"
    assert props["advertised.listeners"] == "SASL_SSL://127.0.0.1:9092,SSL://127.0.0.1:9094"
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["allow.everyone.if.no.acl.found"] == "false" and props["super.users"] == "User:admin"
    assert '"b"' not in "".join(props.values())  # an agent's password is a SCRAM credential, not in a file
    assert "user_agent" not in props["listener.name.controller.plain.sasl.jaas.config"]  # only the broker


def test_the_shipped_acl_file_is_least_privilege() -> None:
    grants = acls.load()
    agent = [g for g in grants if g.principal == "agent"]
    # requests, and cancels of its own held actions (a cancel only ever denies): no verdict
    assert [(g.resource, g.name, set(g.operations)) for g in agent] == \
        [("topic", "actions.requested", {"WRITE", "DESCRIBE"}), ("topic", "actions.cancels", {"WRITE", "DESCRIBE"})]
    analyst = {(g.resource, g.name) for g in grants if g.principal == "analyst" and "READ" in g.operations}
    assert analyst == {("topic", "actions.dropped")}
    assert not any("ALTER" in g.operations or "CREATE" in g.operations for g in grants)


def test_acl_show_names_who_holds_each_principal_and_its_grants(capsys: pytest.CaptureFixture[str]) -> None:
    """``runonce acl show``: from the file alone (no broker), each principal under who connects
    as it, the chart's component keys among them. Catches a principal printed without its
    holder or its grants, and a chart component no principal is said to serve."""
    from runonce.ops.cli import main

    assert main(["acl", "show"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("agent: agents' SDKs"), out
    for grant in acls.load():
        assert f"  {grant.describe()}" in out
    for component in ("worker", "executors", "gateway", "gatewayReader"):
        assert f"kafka.sasl.{component})" in out, component


def test_a_principal_nobody_holds_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "acls.toml"
    path.write_text('[holders]\na = "x"\n[[grant]]\nprincipal="a"\nresource="topic"\nname="t"\noperations=["READ"]\n'
                    '[[grant]]\nprincipal="b"\nresource="topic"\nname="t"\noperations=["READ"]\n')
    with pytest.raises(ConfigError, match=r"missing \['b'\]"):
        acls.holders(path)


@pytest.mark.parametrize("body, message", [
    ('[[grant]]\nprincipal="a"\nresource="cluster"\nname="x"\noperations=["READ"]\n', "resource must be"),
    ('[[grant]]\nprincipal="a"\nresource="topic"\nname="x"\noperations=["ALL"]\n', "operations must be"),
    ('[[grant]]\nprincipal="a"\nresource="topic"\nname="x"\n', "missing operations"),
    ('[[grant]]\nprincipal="a"\nresource="topic"\nname="x"\noperations=["READ"]\npatern="prefixed"\n', "unknown field"),
    ("", "grants nothing"),
])
def test_acl_file_errors_name_the_grant(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "acls.toml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message):
        acls.load(path)


def test_a_broker_secured_once_stays_secured(tmp_path: Path) -> None:
    from runonce.devbroker.broker import Broker

    users_file = tmp_path / "users"
    users = write_users(users_file, ["agent"])
    home = tmp_path / "home"
    Broker(Settings(home=home, broker_users_file=users_file)).write_properties(1, 2)  # as `broker start` does
    again = Broker(Settings(home=home))  # restarted without RUNONCE_BROKER_USERS
    assert again.secured and again.users() == users
    assert again.health_access("h:1").username == "admin"
    assert not Broker(Settings(home=tmp_path / "other")).secured


def test_secured_stack_hands_each_component_its_own_principal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runonce.ops.stack import Stack, services

    monkeypatch.setenv("RUNONCE_SASL_USERNAME", "admin")  # the caller's principal must not leak down
    monkeypatch.setenv("RUNONCE_SASL_PASSWORD", "caller-secret")
    stack = Stack(Settings(home=tmp_path, bootstrap="h:1"))
    admin, _ = stack.secure()
    assert admin.sasl_username == "admin" and admin.broker_users_file == tmp_path / "credentials" / "users.properties"
    by_name = {svc.name: stack.env(svc, secure=True) for svc in services()}
    assert by_name["worker"]["RUNONCE_SASL_USERNAME"] == "stream"
    assert {by_name[n]["RUNONCE_SASL_USERNAME"] for n in by_name if n.startswith("executor-")} == {"executor"}
    assert "RUNONCE_SASL_USERNAME" not in by_name["sandbox"]
    assert all("RUNONCE_SASL_PASSWORD" not in env for env in by_name.values())
    secret = Path(by_name["worker"]["RUNONCE_SASL_PASSWORD_FILE"])
    assert secret.stat().st_mode & 0o077 == 0 and secret.read_text().strip() == read_users(admin.broker_users_file)["stream"]
    assert "RUNONCE_SASL_USERNAME" not in stack.env(services()[1], secure=False)
