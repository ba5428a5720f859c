"""The connectors file: every mistake is refused at start, naming the vendor and the field, and
no secret's value is ever shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from runonce.connectors.executor import registry
from runonce.connectors.toolkit.secrets import Secret
from runonce.errors import ConfigError
from runonce.rate import Rate

STRIPE = '[vendors.payments]\nkind = "stripe"\napi_key = { env = "STRIPE_API_KEY" }\n'
SMTP = ('[vendors.email]\nkind = "smtp"\nhost = "smtp.example.com"\nusername = "agent"\n'
        'password = { env = "SMTP_PASSWORD" }\nsender = "agent@example.com"\n')
ENV = {"STRIPE_API_KEY": "sk_live_planted", "SMTP_PASSWORD": "hunter2-planted"}


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> dict[str, registry.Vendor]:
    path = tmp_path / "connectors.toml"
    path.write_text(text)
    return registry.load(path, ENV if env is None else env)


def test_the_issues_example_builds_with_tls_by_default(tmp_path: Path) -> None:
    vendors = load(tmp_path, STRIPE + "rate = { per_s = 50, in_flight = 32 }\n\n" + SMTP)
    payments, email = vendors["payments"], vendors["email"]
    assert payments.connector.http.base_url == "https://api.stripe.com"  # type: ignore[attr-defined]
    assert payments.rate == Rate(50.0, 1, 32) and payments.connector.tools == {"charge_payment"}
    relay = email.connector.relay  # type: ignore[attr-defined]
    assert (relay.port, relay.tls.value, relay.context is not None) == (587, "starttls", True)


@pytest.mark.parametrize("text, env, message", [
    ('[vendors.payments]\napi_key = { env = "STRIPE_API_KEY" }\n', None, r"vendors\.payments\.kind: is required"),
    (STRIPE.replace("api_key", "api_kye"), None,
     r"vendors\.payments\.api_kye: unknown field for kind 'stripe'; misspelt 'api_key'\?"),
    (SMTP.replace("password", "pasword"), None, r"vendors\.email\.pasword: unknown field for kind 'smtp'; "
                                                 r"misspelt 'password'\?"),
    (STRIPE.replace('env = "STRIPE_API_KEY"', 'evn = "STRIPE_API_KEY"'), None,
     r"vendors\.payments\.api_key: a secret is \{ env = \"VAR\" \} or \{ file = \"path\" \}; this table has 'evn'$"),
    (STRIPE + 'api_kye = "x"\n', None, r"vendors\.payments\.api_kye: unknown field for kind 'stripe'"),
    (STRIPE.replace('{ env = "STRIPE_API_KEY" }', '"sk_live_planted"'), None,
     r"vendors\.payments\.api_key: is a secret: write \{ env = \"VAR\" \} or \{ file = \"path\" \}, never the value"),
    (STRIPE, {}, r"vendors\.payments\.api_key: environment variable STRIPE_API_KEY is not set"),
    (STRIPE.replace('env = "STRIPE_API_KEY"', 'file = "/nonexistent/key"'), None,
     r"vendors\.payments\.api_key: cannot read /nonexistent/key"),
    (STRIPE + 'base_url = "http://api.stripe.com"\n', None,
     r"vendors\.payments\.base_url: plain http is refused except to loopback"),
    (SMTP + 'tls = "none"\n', None, r"vendors\.email\.tls: \"none\" sends mail and credentials in clear"),
    (SMTP + 'tls = "ssl"\n', None, r"vendors\.email\.tls: must be one of starttls, implicit, none"),
    (SMTP.replace("username", "user"), None, r"vendors\.email\.user: unknown field|vendors\.email\.username: "),
    (STRIPE + "rate = { per_s = 0 }\n", None, r"vendors\.payments\.rate\.per_s: must be a positive number"),
    (STRIPE + "rate = { speed = 5 }\n", None, r"vendors\.payments\.rate\.speed: unknown field"),
    (STRIPE + "rate = { in_flight = 2.5 }\n", None, r"vendors\.payments\.rate\.in_flight: must be a positive integer"),
    (SMTP + "port = 587.5\n", None, r"vendors\.email\.port: must be a positive integer, got 587\.5"),
    (STRIPE + 'ca_file = "/nonexistent/ca.pem"\n', None, r"vendors\.payments\.ca_file: no such file"),
    (STRIPE + "\n" + SMTP.replace('host = "smtp.example.com"', 'host = "smtp.example.com"\ntools = ["charge_payment"]'),
     None, r"tool 'charge_payment' is served by vendors\.payments and vendors\.email"),
    ('[vendor.payments]\nkind = "stripe"\n', None, r"unknown table 'vendor'"),
])
def test_a_mistake_names_the_vendor_and_the_field_and_no_secret(tmp_path: Path, text: str,
                                                                env: dict[str, str] | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load(tmp_path, text, env)
    assert "planted" not in str(caught.value)


def test_plain_smtp_is_allowed_to_loopback_only(tmp_path: Path) -> None:
    text = SMTP.replace('"smtp.example.com"', '"127.0.0.1"') + 'tls = "none"\n'
    assert load(tmp_path, text)["email"].connector.relay.port == 25  # type: ignore[attr-defined]


def test_a_secret_shows_where_it_came_from_never_its_value(tmp_path: Path) -> None:
    secret = Secret("env:STRIPE_API_KEY", "sk_live_planted")
    shown = [repr(secret), str(secret), f"{secret}", f"{secret!r}", "%s %r" % (secret, secret)]
    assert all("planted" not in s and "STRIPE_API_KEY" in s for s in shown), shown
    connector = load(tmp_path, STRIPE)["payments"].connector
    assert "planted" not in repr(connector) and secret.reveal() == "sk_live_planted"


def test_runonce_vendor_limits_still_paces_a_vendor_over_the_files_rate(tmp_path: Path) -> None:
    from runonce.connectors.executor.executor import vendor_pace
    from runonce.settings import Settings

    vendor = load(tmp_path, STRIPE + "rate = { per_s = 50 }\n")["payments"]
    assert vendor_pace(Settings.from_env({}), "payments", vendor.rate) == Rate(50.0, 1, None)
    overridden = Settings.from_env({"RUNONCE_VENDOR_LIMITS": "payments:per_s=5,in_flight=2"})
    assert vendor_pace(overridden, "payments", vendor.rate) == Rate(5.0, 1, 2)
    assert vendor_pace(overridden, "email", None) == Rate()


BROKEN_SMTP = SMTP.replace('sender = "agent@example.com"', 'sender = "not an address"')


def test_a_broken_table_stops_its_own_vendors_executor_not_the_others(tmp_path: Path) -> None:
    """Catches ``registry.vendor`` building every vendor strictly (one broken table stopped every
    executor of the file, vendors whose tables are right included)."""
    path = tmp_path / "connectors.toml"
    path.write_text(STRIPE + "\n" + BROKEN_SMTP)
    warned: list[str] = []
    payments = registry.vendor(path, ENV, "payments", warn=warned.append)
    assert payments.connector.tools == {"charge_payment"}
    assert len(warned) == 1 and "vendors.email.sender: must be an address" in warned[0], warned
    with pytest.raises(ConfigError, match=r"vendors\.email\.sender: must be an address"):
        registry.vendor(path, ENV, "email")


def test_a_tool_shared_with_a_vendor_that_builds_still_stops_the_executor(tmp_path: Path) -> None:
    path = tmp_path / "connectors.toml"
    path.write_text(STRIPE + "\n" + SMTP + 'tools = ["charge_payment"]\n')
    with pytest.raises(ConfigError, match="tool 'charge_payment' is served by vendors.payments and vendors.email"):
        registry.vendor(path, ENV, "payments")


def test_a_plugin_that_cannot_be_imported_is_named_with_its_file_and_vendor(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> object:
        raise ImportError("No module named 'their_sdk'")

    monkeypatch.setattr(registry, "kinds", lambda: {**registry.SHIPPED, "tickets": registry.Installed("tickets", broken)})
    path = tmp_path / "connectors.toml"
    path.write_text('[vendors.helpdesk]\nkind = "tickets"\n')
    with pytest.raises(ConfigError, match=rf"^{path}: vendors\.helpdesk\.kind: 'tickets' is an installed entry "
                                          r"point that cannot be loaded: ImportError: No module named 'their_sdk'"):
        registry.load(path, {})


KUBECONFIG = """apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {{cluster: k, user: u}}
clusters:
- name: k
  cluster: {{server: "{server}"}}
users:
- name: u
  user: {{token: t0ken}}
"""


@pytest.mark.parametrize("kind", ["slack-webhook", "kubernetes"])
def test_plain_http_off_this_machine_is_refused_for_a_webhook_url_and_a_kubeconfig_server(
        tmp_path: Path, kind: str) -> None:
    """Catches either plain-http refusal removed (slack.webhook_from_config, kubeconfig's server
    check): a Slack webhook URL or a bearer token would cross the network in clear. Loopback
    stays allowed (a sandbox, a port-forward)."""
    def table(host: str) -> tuple[str, dict[str, str]]:
        if kind == "slack-webhook":
            return ('[vendors.hook]\nkind = "slack-webhook"\nurl = { env = "HOOK" }\n',
                    {"HOOK": f"http://{host}/services/T0/B0/x"})
        config = tmp_path / f"kubeconfig-{host}"
        config.write_text(KUBECONFIG.format(server=f"http://{host}:6443"))
        return f'[vendors.cluster]\nkind = "kubernetes"\nkubeconfig = "{config}"\n', {}

    text, env = table("hooks.example.com")
    with pytest.raises(ConfigError, match=r"https://|plain http is refused"):
        load(tmp_path, text, env)
    text, env = table("127.0.0.1")
    assert load(tmp_path, text, env)
