"""``runonce connectors check --probe`` over the sandbox's connectors file, every kind at once:
each probe answers with the right credentials; with every credential wrong, each fails naming its
vendor, and no secret, right or wrong, is in what the command printed."""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
from pathlib import Path

from runonce.connectors.vendors.sandbox.google_calendar import ServiceAccountKey
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.devbroker.users import write_private
from runonce.ops import child

PROBED = ("calendar", "jira", "kubernetes", "payments", "salesforce", "slack", "smtp")


def _check(path: Path) -> subprocess.CompletedProcess[str]:
    return child.run(["connectors", "check", "--probe", "--file", str(path)], os.environ, 60)


def _planted(local: LocalVendors) -> list[str]:
    key_lines = json.loads(local.google_account.key_json())["private_key"].splitlines()[1:3]
    return [local.stripe_key, local.smtp_password, local.slack_token, local.webhook_secret, local.jira_token,
            local.salesforce_token, local.google_token, local.kubernetes_token, *key_lines]


def test_every_kind_probes_and_every_wrong_credential_fails_by_name_showing_no_secret(
        local: LocalVendors, tmp_path: Path) -> None:
    right = _check(local.write_connectors(tmp_path / "right.toml"))
    assert right.returncode == 0, right.stdout + right.stderr
    for vendor in PROBED:
        line = ("\n" + right.stdout).split(f"\n{vendor}: kind")[1].split("\n")[0]
        assert "probe: ok" in line, (vendor, right.stdout)

    wrong_dir = tmp_path / "wrong"
    wrong_dir.mkdir()
    text = local.connectors_toml()
    wrong_values: list[str] = []
    for secret_file in sorted((local.folder / "secrets").iterdir()):
        if secret_file.name == "kubeconfig":
            continue
        value = (ServiceAccountKey(f"{local.http_url}/token").key_json() if secret_file.suffix == ".json"
                 else "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode() if "webhook" in secret_file.name
                 else f"wrong-{secrets.token_hex(12)}")
        wrong_values.append(value)
        write_private(wrong_dir / secret_file.name, value)
        text = text.replace(str(secret_file), str(wrong_dir / secret_file.name))
    # the kubeconfig names its token file beside it: a copy beside the wrong token
    write_private(wrong_dir / "kubeconfig", local.kubeconfig.read_text())
    text = text.replace(str(local.kubeconfig), str(wrong_dir / "kubeconfig"))
    (wrong_dir / "connectors.toml").write_text(text)
    wrong = _check(wrong_dir / "connectors.toml")
    printed = wrong.stdout + wrong.stderr
    assert wrong.returncode == 1, printed
    for vendor in PROBED:
        assert "probe: FAILED" in ("\n" + printed).split(f"\n{vendor}: kind")[1].split("\n")[0], (vendor, printed)
    shown = right.stdout + right.stderr + printed
    for value in _planted(local) + wrong_values:
        for secret in (json.loads(value)["private_key"].splitlines()[1:3] if value.startswith("{") else [value]):
            assert secret not in shown
