"""The oracle must be able to fail: planted duplicates, losses, conflicts and phantoms."""

from __future__ import annotations

from typing import Any

from runonce.audit.oracle import account, expected_mismatches
from runonce.kafka.reader import Record
from runonce.sdk.submit import build_request
from runonce.wire.codec import Codec
from runonce.wire.headers import H_ERROR_TYPE, H_ORIGIN_OFFSET, H_ORIGIN_PARTITION, H_ORIGIN_TOPIC

codec = Codec()


def req(p: int, o: int, key: str | None = None) -> tuple[Record, dict[str, Any]]:
    r = build_request("send_email", {"to": "x", "o": o}, agent_id="a", idempotency_key=key)
    return Record("actions.requested", p, o, 0, None, codec.encode("ActionRequested", r), ()), r


def decision(request: dict[str, Any], p: int, o: int, outcome: str = "APPROVED", reason: str = "unique") -> Record:
    d = {"request": request, "outcome": outcome, "reason": reason, "dedup_key": "k", "unkeyed": False,
         "content_hash": "h", "matched_key": None, "first_action_id": None, "first_partition": None,
         "first_offset": None, "window_ms": None, "event_time_ms": 0, "source_partition": p, "source_offset": o}
    topic = "actions.approved" if outcome == "APPROVED" else "actions.dropped"
    return Record(topic, 0, 0, 0, None, codec.encode("ActionDecision", d), ())


def dlq(p: int, o: int) -> Record:
    headers = ((H_ORIGIN_TOPIC, b"actions.requested"), (H_ORIGIN_PARTITION, str(p).encode()),
               (H_ORIGIN_OFFSET, str(o).encode()), (H_ERROR_TYPE, b"decode_error"))
    return Record("actions.dlq", 0, 0, 0, None, b"junk", headers)


def test_a_clean_run_is_ok() -> None:
    (r1, a1), (r2, a2) = req(0, 0), req(1, 0)
    bad = Record("actions.requested", 2, 0, 0, None, b"junk", ())
    report = account([r1, r2, bad], [decision(a1, 0, 0)], [decision(a2, 1, 0, "DROPPED", "duplicate_key")], [dlq(2, 0)])
    assert report.ok, report.summary()
    assert (report.requested, report.approved, report.dropped, report.dead_lettered) == (3, 1, 1, 1)
    assert expected_mismatches(report, {a1["action_id"]: "unique", a2["action_id"]: "duplicate_key"}) == {}
    assert expected_mismatches(report, {a1["action_id"]: "duplicate_key"}) == {a1["action_id"]: ("duplicate_key", "unique")}


def test_a_lost_record_fails() -> None:
    (r1, a1), (r2, _) = req(0, 0), req(0, 1)
    report = account([r1, r2], [decision(a1, 0, 0)], [], [])
    assert not report.ok and report.lost == [(0, 1)]


def test_a_planted_duplicate_approval_fails() -> None:
    (r1, a1), (r2, a2) = req(0, 0, key="K"), req(0, 1, key="K")
    report = account([r1, r2], [decision(a1, 0, 0), decision(a2, 0, 1)], [], [])
    assert not report.ok and report.doubled_keys == ["K"]


def test_a_record_decided_two_ways_fails() -> None:
    (r1, a1) = req(0, 0)
    report = account([r1], [decision(a1, 0, 0)], [decision(a1, 0, 0, "DROPPED", "duplicate_key")], [])
    assert not report.ok and report.conflicts == [(0, 0)]
    # Both decisions and where they were written: the next such report needs no digging.
    both = report.decided_two_ways[(0, 0)]
    assert len(both) == 2 and both[0].startswith("APPROVED unique") and both[1].startswith("DROPPED duplicate_key")
    assert "actions.dropped[0]@0" in both[1] and "decided two ways: actions.requested[0]@0" in report.summary()


def test_a_dead_letter_written_twice_is_counted() -> None:
    report = account([Record("actions.requested", 2, 0, 0, None, b"junk", ())], [], [], [dlq(2, 0), dlq(2, 0)])
    assert report.ok and report.dead_letters_repeated == 1 and report.re_emitted == 1


def test_a_decision_for_nothing_requested_fails() -> None:
    (r1, a1), (_, a2) = req(0, 0), req(5, 5)
    report = account([r1], [decision(a1, 0, 0), decision(a2, 5, 5)], [], [])
    assert not report.ok and report.phantoms == [(5, 5)]


def test_a_foreign_record_in_an_output_topic_fails() -> None:
    (r1, a1) = req(0, 0)
    junk = Record("actions.approved", 0, 9, 0, None, b"junk", ())
    report = account([r1], [decision(a1, 0, 0), junk], [], [])
    assert not report.ok and report.unreadable == [("actions.approved", 0, 9)]


def test_the_same_decision_twice_is_a_counted_re_emission_not_a_failure() -> None:
    (r1, a1) = req(0, 0)
    report = account([r1], [decision(a1, 0, 0), decision(a1, 0, 0)], [], [])
    assert report.ok and report.re_emitted == 1 and report.approved == 1


def test_a_held_record_is_held_until_its_release_and_a_release_twice_is_caught() -> None:
    (r1, a1), (r2, a2) = req(0, 0, key="K1"), req(0, 1, key="K2")
    held = [Record("actions.held", 0, i, 0, None, decision(a, 0, o).value, ()) for i, (a, o) in enumerate(((a1, 0), (a2, 1)))]
    waiting = account([r1, r2], [decision(a1, 0, 0)], [], [], held=held)
    assert waiting.ok and waiting.held == [(0, 1)] and waiting.approved == 1, waiting.summary()
    released_twice = account([r1, r2], [decision(a1, 0, 0), decision(a1, 0, 0)], [decision(a2, 0, 1, "DROPPED",
                                                                                             "approval_denied")], [],
                             held=held)
    assert released_twice.held == [] and released_twice.re_emitted_by_action == {a1["action_id"]: 1}
    assert account([r1, r2], [], [], [], held=held[:1]).lost == [(0, 1)]


def test_a_windowed_account_leaves_out_what_was_requested_before_the_window_and_nothing_else() -> None:
    """verify(since_ms=...) reads a time window: a decision for a record requested before the
    window (its partition's first record in it) is outside, one after it is still a phantom."""
    (_, before), (r5, a5) = req(0, 4), req(0, 5)
    _, stranger = req(0, 9)
    late = decision(before, 0, 4)  # an earlier test's record, decided inside the window
    windowed = account([r5], [decision(a5, 0, 5), late], [], [], windowed=True)
    assert windowed.ok and windowed.phantoms == [], windowed.summary()
    assert account([r5], [decision(a5, 0, 5), late], [], []).phantoms == [(0, 4)]  # unwindowed: a phantom
    phantom = account([r5], [decision(a5, 0, 5), decision(stranger, 0, 9)], [], [], windowed=True)
    assert not phantom.ok and phantom.phantoms == [(0, 9)]
