"""A connector of a third party's own (tests/connector_plugin, installed as a package and found by
its entry point) passes the replay fixture against the sandbox's email API, which deduplicates
on Idempotency-Key as Resend's does; the fixture fails the same connector once it forgets the key."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Callable

import pytest

from runonce.connectors.executor import registry
from runonce.connectors.toolkit.base import ActionCall, Connector
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.errors import ConfigError
from runonce.wire.results import Result

Replay = Callable[[Connector, ActionCall, Callable[[], int]], Result]


def followups(local: LocalVendors, tmp_path: Path) -> Connector:
    path = tmp_path / "connectors.toml"
    path.write_text(f'[vendors.followups]\nkind = "followup-email"\nbase_url = "{local.http_url}"\n'
                    f'api_key = {{ file = "{local.email_api_key_file}" }}\nsender = "Sales <sales@example.com>"\n')
    return registry.load(path, {})["followups"].connector


def call() -> ActionCall:
    key = f"followup-{uuid.uuid4().hex[:8]}"
    return ActionCall(key, "send_followup_email", {"recipient": "john@prospect.example", "subject": "Following up",
                                                   "body": "Hi John", "campaign_id": "q4"}, key)


def test_the_entry_point_kind_passes_the_replay_fixture(local: LocalVendors, tmp_path: Path, replay: Replay) -> None:
    connector = followups(local, tmp_path)
    assert type(connector).__module__ == "runonce_followup"  # found by the entry point, not shipped
    this = call()
    outcome = replay(connector, this, lambda: local.ledger.count("emails", this.vendor_key))
    assert outcome.vendor_ref
    # the replay reached the API again with the same key (VENDOR_KEY): two requests, one email
    assert [r.key for r in local.ledger.requests("/emails")] == [this.vendor_key] * 2


def test_the_replay_fixture_fails_the_connector_once_it_forgets_the_key(local: LocalVendors, tmp_path: Path,
                                                                        replay: Replay) -> None:
    connector = followups(local, tmp_path)
    forgetful = type(connector)
    original = forgetful.headers
    forgetful.headers = lambda self, c: {k: v for k, v in original(self, c).items()  # type: ignore[method-assign]
                                         if k != "Idempotency-Key"}
    this = call()
    try:
        with pytest.raises(AssertionError, match="replay with the same key made 1 more side effect"):
            replay(connector, this, lambda: local.ledger.count("emails"))
    finally:
        forgetful.headers = original  # type: ignore[method-assign]


def test_an_unknown_kind_names_the_vendor_the_field_and_every_known_kind(tmp_path: Path) -> None:
    path = tmp_path / "connectors.toml"
    path.write_text('[vendors.mail]\nkind = "sendgrid"\n')
    with pytest.raises(ConfigError, match=r"vendors\.mail\.kind: unknown kind 'sendgrid'; known: followup-email, google-calendar, "
                                          r"jira, kubernetes, postgres, salesforce, slack, slack-webhook, smtp, stripe, "
                                          r"webhook"):
        registry.load(path, {})
