"""`runonce demo` fails on a wrong figure (the wheel check in CI runs it against a real broker
and sandboxes, so a demo that prints 2 emails where the incident expects 1 fails CI)."""

from __future__ import annotations

from collections import Counter

from runonce.ops.demo import Row
from runonce.ops.scenarios import incidents


def test_a_row_is_as_expected_only_with_the_incidents_own_figures() -> None:
    for incident in incidents("t"):
        sent = len(incident.requests)
        assert Row(incident, sent, incident.expected_approved, Counter()).surprise() is None
        assert "expected" in (Row(incident, sent, incident.expected_approved + 1, Counter()).surprise() or "")
        assert "straight calls" in (Row(incident, sent - 1, incident.expected_approved, Counter()).surprise() or "")
