"""The sandboxes as one deployment sees them: the HTTP vendors and an SMTP relay that asks for
STARTTLS and AUTH, with credentials and a private CA of their own, and the connectors file
that reaches them. ``runonce up``, the demo and the tests all run the production connectors
through this file: the sandbox differs from a vendor only in where it is."""

from __future__ import annotations

import base64
import secrets
import ssl
from pathlib import Path
from typing import Mapping

import trustme

from runonce.connectors.toolkit.tls import is_loopback
from runonce.connectors.vendors.sandbox.google_calendar import ServiceAccountKey
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.ledger import Ledger
from runonce.connectors.vendors.sandbox.smtp_server import SmtpServer
from runonce.devbroker.users import write_private

SMTP_USER = "runonce-sandbox"
#: the account the sandbox's Jira Cloud knows
JIRA_EMAIL = "agent@runonce.local"


class LocalVendors:
    """Everything under ``folder``: ``ca.pem`` (clients trust it), ``secrets/`` (mode 600)."""

    def __init__(self, folder: Path, *, http_port: int = 0, smtp_port: int = 0, host: str = "127.0.0.1",
                 implicit_tls: bool = False, advertise: str | None = None) -> None:
        self.folder = folder
        (folder / "secrets").mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        self.ca_file = folder / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.advertise = advertise or ("127.0.0.1" if host == "0.0.0.0" else host)
        ca.issue_cert(self.advertise, "127.0.0.1", "localhost").configure_cert(server_tls)
        self.stripe_key = f"sk_test_{secrets.token_hex(12)}"
        self.smtp_password = secrets.token_urlsafe(18)
        self.stripe_key_file = folder / "secrets" / "stripe_api_key"
        write_private(self.stripe_key_file, self.stripe_key)
        #: the email API's key (``POST /emails``, Resend's shape), for connectors of your own to try
        self.email_api_key = f"re_{secrets.token_hex(12)}"
        self.email_api_key_file = folder / "secrets" / "email_api_key"
        write_private(self.email_api_key_file, self.email_api_key)
        self.smtp_password_file = folder / "secrets" / "smtp_password"
        write_private(self.smtp_password_file, self.smtp_password)
        #: Slack's bot token, and the Standard Webhooks receiver's whsec_ secret
        self.slack_token = f"xoxb-{secrets.token_hex(12)}"
        self.slack_token_file = folder / "secrets" / "slack_token"
        write_private(self.slack_token_file, self.slack_token)
        self.webhook_secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
        self.webhook_secret_file = folder / "secrets" / "webhook_secret"
        write_private(self.webhook_secret_file, self.webhook_secret)
        self.salesforce_token = f"00D{secrets.token_hex(6)}!{secrets.token_urlsafe(24)}"
        self.salesforce_token_file = folder / "secrets" / "salesforce_token"
        write_private(self.salesforce_token_file, self.salesforce_token)
        self.jira_token = secrets.token_urlsafe(18)
        self.jira_token_file = folder / "secrets" / "jira_api_token"
        write_private(self.jira_token_file, self.jira_token)
        #: Kubernetes: a service account's token, in a file a kubeconfig names (``tokenFile``)
        self.kubernetes_token = secrets.token_urlsafe(32)
        self.kubernetes_token_file = folder / "secrets" / "kubernetes_token"
        write_private(self.kubernetes_token_file, self.kubernetes_token)
        #: Google: a static access token, and a service account's key (its token_uri: the sandbox)
        self.google_token = f"ya29.{secrets.token_urlsafe(24)}"
        self.google_token_file = folder / "secrets" / "google_token"
        write_private(self.google_token_file, self.google_token)
        self.vendors = VendorServer(http_port, host, stripe_key=self.stripe_key, email_api_key=self.email_api_key,
                                    slack_token=self.slack_token, webhook_secret=self.webhook_secret,
                                    jira_token=self.jira_token, salesforce_token=self.salesforce_token,
                                    google_token=self.google_token, kubernetes_token=self.kubernetes_token,
                                    # off this machine's loopback the connectors take https alone
                                    tls=None if is_loopback(self.advertise) else server_tls)
        self.google_account = ServiceAccountKey(f"{self.http_url}/token")
        self.vendors.state.google.account = self.google_account
        self.google_key_file = folder / "secrets" / "google_service_account.json"
        write_private(self.google_key_file, self.google_account.key_json())
        self.kubeconfig = folder / "secrets" / "kubeconfig"
        write_private(self.kubeconfig, "\n".join([
            "apiVersion: v1", "kind: Config", "current-context: sandbox",
            "clusters:", "- name: sandbox", "  cluster:", f"    server: {self.http_url}",
            *([] if self.vendors.tls is None else [f"    certificate-authority: {self.ca_file}"]),
            "users:", "- name: runonce-executor", "  user:", f"    tokenFile: {self.kubernetes_token_file.name}",
            "contexts:", "- name: sandbox", "  context:", "    cluster: sandbox", "    user: runonce-executor",
            "    namespace: default", ""]))
        self.smtp = SmtpServer(self.vendors.ledger, smtp_port, host, tls=server_tls, implicit=implicit_tls,
                               users={SMTP_USER: self.smtp_password})
        self.implicit_tls = implicit_tls

    @property
    def ledger(self) -> Ledger:
        return self.vendors.ledger

    @property
    def http_url(self) -> str:
        scheme = "http" if self.vendors.tls is None else "https"
        return f"{scheme}://{self.advertise}:{self.vendors.httpd.server_address[1]}"

    def start(self) -> LocalVendors:
        self.vendors.start()
        self.smtp.start()
        return self

    def stop(self) -> None:
        self.smtp.stop()
        self.vendors.stop()

    def connectors_toml(self, extra: Mapping[str, Mapping[str, str]] | None = None) -> str:
        """``extra``: more fields per vendor, as TOML values (``{"jira": {"search_lag_s": "8"}}``)."""
        url = self.http_url
        lines = ["# The local sandboxes, reached by the same connectors as real vendors (docs/vendors.md).",
                 "[vendors.payments]", 'kind = "stripe"', f'base_url = "{url}"',
                 f'api_key = {{ file = "{self.stripe_key_file}" }}', "",
                 "[vendors.smtp]", 'kind = "smtp"', f'host = "{self.advertise}"', f"port = {self.smtp.port}",
                 f'tls = "{"implicit" if self.implicit_tls else "starttls"}"', f'ca_file = "{self.ca_file}"',
                 f'username = "{SMTP_USER}"', f'password = {{ file = "{self.smtp_password_file}" }}',
                 'sender = "agent@runonce.local"', "",
                 "[vendors.webhook]", 'kind = "webhook"', f'url = "{url}/hooks/ops"',
                 f'secret = {{ file = "{self.webhook_secret_file}" }}', 'tools = ["notify_ops"]', "",
                 "[vendors.kubernetes]", 'kind = "kubernetes"', f'kubeconfig = "{self.kubeconfig}"', "",
                 "[vendors.slack]", 'kind = "slack"', f'base_url = "{url}"',
                 f'token = {{ file = "{self.slack_token_file}" }}', "",
                 "[vendors.jira]", 'kind = "jira"', f'base_url = "{url}"', f'email = "{JIRA_EMAIL}"',
                 f'api_token = {{ file = "{self.jira_token_file}" }}', "",
                 "[vendors.salesforce]", 'kind = "salesforce"', f'instance_url = "{url}"',
                 f'token = {{ file = "{self.salesforce_token_file}" }}', "",
                 "[vendors.calendar]", 'kind = "google-calendar"', f'base_url = "{url}"',
                 f'service_account_key = {{ file = "{self.google_key_file}" }}', ""]
        if self.vendors.tls is not None:  # every HTTP vendor trusts the sandbox's CA
            for name in ("payments", "webhook", "slack", "jira", "salesforce", "calendar"):
                at = lines.index(f"[vendors.{name}]") + 1
                lines[at:at] = [f'ca_file = "{self.ca_file}"']
        for name, fields in (extra or {}).items():
            at = lines.index(f"[vendors.{name}]") + 1
            lines[at:at] = [f"{key} = {value}" for key, value in fields.items()]
        return "\n".join(lines)

    def write_connectors(self, path: Path | None = None,
                         extra: Mapping[str, Mapping[str, str]] | None = None) -> Path:
        path = path or self.folder / "connectors.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.connectors_toml(extra), encoding="utf-8")
        return path

    def env(self, extra: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, str]:
        """The environment of an executor that reaches these sandboxes."""
        return {"RUNONCE_CONNECTORS": str(self.write_connectors(extra=extra))}
