"""No config error of any shipped kind shows a secret, or a piece of one: each case is a mistake
a user makes with a secret in it (a DSN libpq misreads, a webhook URL over plain http, a key that
is not JSON, a kubeconfig that is not YAML), and the error must still name the field.

Every planted value holds ``PLANT`` in capitals; a message may name where a secret came from
(``env:ORDERS_DSN``), never any part of the value.

Catches (each was the code's behaviour once, or is one edit away): ``postgres._check_dsn``
passing libpq's parse message on (``missing "=" after "SECRETHALF"``), or naming the host it
parsed out of a password with a raw ``@`` (``reaches ss off this machine``), or letting a port
parsed out of a password reach psycopg's ``invalid integer value``; the kubeconfig reader
passing PyYAML's message on (it quotes the line); the Slack webhook and Standard Webhooks
checks quoting the URL or secret they refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from runonce.connectors.executor import registry
from runonce.errors import ConfigError

PG = '[vendors.orders_db]\nkind = "postgres"\ndsn = { env = "SECRET" }\n[vendors.orders_db.tools.refund]\nsql = "SELECT 1"\n'


def kubeconfig(tmp_path: Path, text: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    return f'[vendors.cluster]\nkind = "kubernetes"\nkubeconfig = "{path}"\n'


CASES = {
    # kind: (the vendor table, the planted secret)
    "postgres, a space unquoted": (PG, "host=127.0.0.1 user=app password=PLANTsecret PLANThalf dbname=x"),
    "postgres, a raw @ in a URI's password": (PG, "postgresql://app:PLANTa@PLANTb@db.example.com/x"),
    "postgres, a raw / in a URI's password": (PG, "postgresql://app:PLANTa/PLANTb@127.0.0.1/x"),
    "postgres, a port in the password's place": (PG, "host=127.0.0.1 port=PLANT5432 password=x"),
    "postgres, off this machine without TLS": (PG, "host=PLANT.example.com password=PLANTpw"),
    "stripe, the key written in the file": ('[vendors.p]\nkind = "stripe"\napi_key = "sk_live_PLANT"\n', ""),
    "smtp, the password written in the file": ('[vendors.e]\nkind = "smtp"\nhost = "smtp.example.com"\n'
                                               'username = "a"\npassword = "PLANTpw"\nsender = "a@example.com"\n', ""),
    "slack-webhook, plain http off this machine": (
        '[vendors.hook]\nkind = "slack-webhook"\nurl = { env = "SECRET" }\n',
        "http://hooks.example.com/services/T0/B0/PLANTtoken"),
    "webhook, a secret that is not base64": (
        '[vendors.ops]\nkind = "webhook"\nurl = "https://ops.example.com/hook"\nsecret = { env = "SECRET" }\n'
        'tools = ["restart_service"]\n', "whsec_PLANT!!not-base64"),
    "google-calendar, a key that is not JSON": (
        '[vendors.cal]\nkind = "google-calendar"\nservice_account_key = { env = "SECRET" }\n', '{"PLANT": '),
    "jira, the token written in the file": ('[vendors.j]\nkind = "jira"\nbase_url = "https://x.atlassian.net"\n'
                                            'email = "a@example.com"\napi_token = "PLANTtoken"\n', ""),
    "salesforce, the token written in the file": (
        '[vendors.s]\nkind = "salesforce"\ninstance_url = "https://x.my.salesforce.com"\ntoken = "PLANT"\n', ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_config_error_shows_a_piece_of_a_secret(tmp_path: Path, case: str) -> None:
    table, secret = CASES[case]
    path = tmp_path / "connectors.toml"
    path.write_text(table)
    with pytest.raises(ConfigError) as caught:
        registry.load(path, {"SECRET": secret})
    said = str(caught.value)
    assert "PLANT" not in said, said
    assert str(path) in said and "vendors." in said, said


@pytest.mark.parametrize("text", [
    # a token with a colon and a space: not YAML (PyYAML's message quotes the line)
    "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: PLANTa: PLANTb\n",
    # a tab where YAML wants spaces, on the token's line
    "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n\ttoken: PLANTtoken\n",
])
def test_a_kubeconfig_that_is_not_yaml_is_named_without_its_token(tmp_path: Path, text: str) -> None:
    path = tmp_path / "connectors.toml"
    path.write_text(kubeconfig(tmp_path, text))
    with pytest.raises(ConfigError, match="is not YAML") as caught:
        registry.load(path, {})
    assert "PLANT" not in str(caught.value), str(caught.value)
