"""A vendor's rate limit, on the sandbox's real HTTP: its 429 + Retry-After holds every call
to the vendor (connectors/executor/throttle.py), so no call is refused twice in a row and each message is
posted once, though Slack deduplicates nothing."""

from __future__ import annotations

import itertools
import uuid
from concurrent.futures import ThreadPoolExecutor

from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.executor.throttle import Throttle
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.wire.results import Status
from tests.support.slack import POST, post, slack_connector

LIMIT_PER_S = 20
POSTS = 40
IN_FLIGHT = 16


def test_a_refusal_holds_every_call_so_none_is_refused_twice(vendors: VendorServer) -> None:
    vendors.state.faults.add(VendorFault(POST, rate_limit_per_s=LIMIT_PER_S))
    # Another client of the vendor has just spent its window: our first calls meet 429s.
    for i in range(LIMIT_PER_S):
        post(vendors, "#other", f"neighbour {i}")
    connector = slack_connector(vendors)
    # No rate of ours: the vendor's 429s alone must pace the calls.
    runner = ActionRunner(connector, RetryPolicy(max_attempts=1), throttle=Throttle("slack"))
    run = uuid.uuid4().hex[:8]
    texts = [f"{run} alert {i}" for i in range(POSTS)]
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        outcomes = list(pool.map(lambda text: runner.perform(
            ActionCall(text, "post_slack_message", {"channel": "#ops", "text": text}, text)), texts))

    assert [o.status for o in outcomes] == [Status.SUCCEEDED] * POSTS, [o.error for o in outcomes if o.error]
    refused = vendors.ledger.requests(POST, run, refused=True)
    assert refused, "the rate limit never refused a call: the test proves nothing"
    for text in texts:
        assert vendors.ledger.count("slack", text) == 1, f"{text!r} posted {vendors.ledger.count('slack', text)} times"
        answers = [r.refused for r in vendors.ledger.requests(POST, f'"{text}"')]
        twice = [pair for pair in itertools.pairwise(answers) if pair == (429, 429)]
        assert not twice, f"{text!r} was refused twice in a row: {answers}"
    assert runner.throttle.refusals == len(refused)
