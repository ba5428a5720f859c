"""The ``slack`` kind (Web API ``chat.postMessage``) and ``slack-webhook`` kind against the
sandbox's Slack, which speaks Slack's paths, token check and ok/error bodies, and records
every request: a second post is visible, since Slack deduplicates nothing."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from runonce.connectors.executor import registry
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.toolkit.errors import (
    ConnectorError,
    OutcomeUnknown,
    PermanentVendorError,
    RateLimited,
    TransientVendorError,
)
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import HttpResult, VendorHttp
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.connectors.vendors.slack import SlackConnector, SlackWebhookConnector, _raise_for_slack
from runonce.wire.results import Status
from tests.connectors.vendor_api_facts import SLACK_BASE_PATH, SLACK_DOCUMENTED_ERRORS, SLACK_POST_MESSAGE
from tests.support.slack import POST, slack_connector

FAST = RetryPolicy(max_attempts=4, base_backoff_s=0.01)


def _call(text: str, channel: str = "#incidents") -> ActionCall:
    return ActionCall(str(uuid.uuid4()), "post_slack_message", {"channel": channel, "text": text}, "key-1")


def test_a_post_and_its_answer_have_the_shape_slacks_description_gives(vendors: VendorServer) -> None:
    """The schema check: the request the connector sends, as the sandbox recorded it, and the
    answer it read, against the facts of Slack's published description."""
    text = f"db latency {uuid.uuid4().hex[:6]}"
    ref = slack_connector(vendors).perform(_call(text)).vendor_ref
    [request] = vendors.ledger.requests(POST, text)
    assert request.path == SLACK_BASE_PATH + SLACK_POST_MESSAGE["path"] and request.method == SLACK_POST_MESSAGE["method"]
    assert request.headers["content-type"].split(";")[0] in SLACK_POST_MESSAGE["consumes"]
    assert request.headers["authorization"] == "Bearer <redacted>"  # the token in a header, never recorded
    sent = json.loads(request.raw)
    assert SLACK_POST_MESSAGE["required"] <= sent.keys() <= SLACK_POST_MESSAGE["parameters"], sent
    channel, ts = ref.split("/")
    assert re.match(SLACK_POST_MESSAGE["channel_pattern"], channel) and re.match(SLACK_POST_MESSAGE["ts_pattern"], ts)
    # ... and the sandbox answers as the description says Slack does
    [effect] = vendors.ledger.effects("slack", text)
    assert effect.detail["ref"] == ref


@pytest.mark.parametrize("channel, error", [("#nowhere", "channel_not_found"), ("#archived", "is_archived")])
def test_a_refused_post_is_failed_and_never_posted_again(vendors: VendorServer, channel: str, error: str) -> None:
    outcome = ActionRunner(slack_connector(vendors), FAST, sleep=lambda _s: None).perform(_call("x", channel))
    assert outcome is not None and outcome.status is Status.FAILED and error in (outcome.error or "")
    assert error in SLACK_POST_MESSAGE["errors"]
    assert len(vendors.ledger.requests(POST, f'"{channel}"')) == 1


def test_a_wrong_token_is_a_clear_permanent_failure_that_names_slack_not_the_token(vendors: VendorServer) -> None:
    wrong = "xoxb-" + uuid.uuid4().hex
    connector = SlackConnector("team-slack", Secret("env:SLACK_BOT_TOKEN", wrong), VendorHttp(vendors.url))
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(_call("hello"))
    assert outcome is not None and outcome.status is Status.FAILED, outcome
    assert "invalid_auth" in (outcome.error or "") and "Slack refused the token" in (outcome.error or "")
    assert wrong not in (outcome.error or "") and wrong not in repr(connector)
    assert len(vendors.ledger.requests(POST, '"hello"')) == 1  # not retried
    with pytest.raises(PermanentVendorError, match="invalid_auth"):
        connector.probe()
    assert "auth.test: ok" in slack_connector(vendors).probe()


def test_a_post_whose_answer_is_lost_is_in_doubt_and_never_posted_again(vendors: VendorServer) -> None:
    """Slack posted, then the connection dropped: a second post would be a second message."""
    vendors.state.faults.add(VendorFault(POST, drop_response=1))
    text = f"deploy done {uuid.uuid4().hex[:6]}"
    outcome = ActionRunner(slack_connector(vendors), FAST, sleep=lambda _s: None).perform(_call(text))
    assert outcome is not None and outcome.status is Status.IN_DOUBT, outcome
    assert vendors.ledger.count("slack", text) == 1 and len(vendors.ledger.requests(POST, text)) == 1


def test_slacks_rate_limit_is_the_vendors_limit(vendors: VendorServer) -> None:
    vendors.state.faults.add(VendorFault(POST, rate_limit_per_s=1))
    connector = slack_connector(vendors)
    connector.perform(_call("first"))
    with pytest.raises(RateLimited) as refused:
        connector.perform(_call("second"))
    assert refused.value.retry_after_s is not None
    [answer] = [r for r in vendors.ledger.requests(POST, '"second"')]
    assert answer.refused == 429 and vendors.ledger.count("slack", "second") == 0


@pytest.mark.parametrize("error", [*SLACK_POST_MESSAGE["errors"], *SLACK_DOCUMENTED_ERRORS, "an_error_not_yet_invented"])
def test_every_error_slack_describes_has_one_meaning(error: str) -> None:
    """Each error of the description and the method's documentation maps to what it says: a
    post that may have happened is unknown (never failed, never retried blind)."""
    answer = HttpResult(429 if error in ("ratelimited", "rate_limited") else 200, {"ok": False, "error": error})
    expected = {"ratelimited": RateLimited, "rate_limited": RateLimited, "internal_error": OutcomeUnknown,
                "fatal_error": OutcomeUnknown, "service_unavailable": TransientVendorError,
                "request_timeout": TransientVendorError}.get(error, PermanentVendorError)
    with pytest.raises(ConnectorError) as raised:
        _raise_for_slack("https://slack.com/api/chat.postMessage", answer)
    assert type(raised.value) is expected, (error, raised.value)  # exactly: RateLimited is also transient


def test_the_incoming_webhook_kind_posts_once_and_hides_its_url(local: LocalVendors, vendors: VendorServer) -> None:
    path = local.folder / "hook.toml"
    url_file = local.folder / "secrets" / "hook_url"
    url_file.write_text(vendors.slack_hook_url)
    path.write_text(f'[vendors.alerts]\nkind = "slack-webhook"\nurl = {{ file = "{url_file}" }}\n')
    connector = registry.load(path, {})["alerts"].connector
    assert isinstance(connector, SlackWebhookConnector)
    text = f"disk full {uuid.uuid4().hex[:6]}"
    assert connector.perform(_call(text)).vendor_ref == "posted"
    assert vendors.ledger.count("slack", text) == 1
    [request] = vendors.ledger.requests("/services/", text)
    assert request.path.endswith("/<redacted>")  # the URL's secret is not in the record
    secret_segment = vendors.slack_hook_url.rsplit("/", 1)[1]
    wrong = SlackWebhookConnector.at("alerts", Secret("file:x", vendors.slack_hook_url + "x"))
    with pytest.raises(PermanentVendorError) as refused:
        wrong.perform(_call("y"))
    assert "HTTP 404" in str(refused.value) and secret_segment not in str(refused.value)
