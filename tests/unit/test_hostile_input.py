"""Hostile input never stops a partition: every record is decided or dead-lettered (never
raised), every record the job writes fits its topic, and identity is compared in one normal
form. Over the same ``Pipeline`` every runtime runs, in memory."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from runonce.core import limits
from runonce.core.decision import ScopeState
from runonce.errors import InvariantViolation
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.sdk.submit import build_request
from runonce.streams.ports import Inbound
from runonce.streams.processor import StateStoreFailed
from runonce.wire.headers import H_ERROR_MESSAGE, H_ERROR_TYPE
from tests.support.memory import MemoryPipeline

T0 = 1_800_000_000_000
MB = 1024 * 1024

#: what each topic accepts, as `runonce topics create` configures it
TOPIC_LIMIT = {spec.name: int(spec.configs["max.message.bytes"]) for spec in topics.TOPICS}
CHANGELOG_LIMIT = min(TOPIC_LIMIT[topics.CHANGELOG_KEYS], TOPIC_LIMIT[topics.CHANGELOG_SCOPES])


def _record(tool: str = "send_email", params_json: str | None = None, **fields: Any) -> dict[str, Any]:
    base = build_request(tool, {"to": "lead@prospect.example"}, agent_id="hostile", idempotency_key=None)
    if params_json is not None:
        base["params_json"] = params_json
    return {**base, **fields}


def _feed(pipe: MemoryPipeline, record: dict[str, Any], t: int = T0, partition: int = 0) -> None:
    pipe.feed_raw(pipe.codec.encode("ActionRequested", record), key=None, timestamp_ms=t,
                              partition=partition)


def _dead(pipe: MemoryPipeline) -> list[dict[str, str]]:
    return [{k: v.decode() for k, v in headers} for _, _, headers in pipe.outputs[topics.DLQ]]


NESTED = '{"to": "a@x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}"

HOSTILE = [
    # (name, record, a phrase of the dead letter's message naming the field)
    ("JSON nested 100,000 deep", _record(params_json=NESTED), "nested deeper than 32"),
    ("JSON nested 33 deep", _record(params_json='{"to": "a@x", "n": ' + "[" * 32 + "]" * 32 + "}"),
     "nested deeper than 32"),
    ("a 2 MB agent id", _record(agent_id="a" * 2 * MB), "agent_id is 2097152 chars"),
    ("a 1 MB tool", _record(tool="t" * MB), "tool is 1048576 chars"),
    ("a 1.5 MB natural id", _record("create_jira_ticket", '{"project": "P", "customer_id": "c"}',
                                    natural_id="n" * (3 * MB // 2)), "natural_id is"),
    ("a long action id", _record(action_id="x" * 129), "action_id is 129 chars"),
    ("a control character in the action id", _record(action_id="a\x00b"), "control characters"),
    ("a null recipient", _record(params_json='{"to": null}'), "'to' must be a string (email), got null"),
    ("a list of recipients", _record(params_json='{"to": ["a@x", "b@x"]}'), "'to' must be a string"),
    ("an object as recipient", _record(params_json='{"to": {"a": 1}}'), "'to' must be a string"),
    ("a blank channel", _record("post_slack_message", '{"channel": "  ", "text": "t"}'), "non-blank string"),
    ("a float as service", _record("restart_service", '{"service": 1.5}'), "a number with a fraction"),
    ("NaN", _record("charge_payment", '{"amount": NaN}', idempotency_key="k1"), "NaN is not a JSON number"),
    ("Infinity", _record("charge_payment", '{"amount": -Infinity}', idempotency_key="k2"), "Infinity"),
    ("a float too large", _record("charge_payment", '{"amount": 1e999}', idempotency_key="k3"),
     "cannot be canonicalized"),
    ("two recipients under one key", _record(params_json='{"to": "a@x", "to": "b@x"}'), "duplicate key 'to'"),
    ("one key in NFC and NFD", _record(params_json='{"to": "a@x", "caf\\u00e9": 1, "cafe\\u0301": 2}'),
     "duplicate key"),
    ("a lone surrogate", _record(params_json='{"to": "a@x", "body": "\\ud800"}'), "cannot be canonicalized"),
    ("an integer of 5000 digits", _record(params_json='{"to": "a@x", "n": ' + "9" * 5000 + "}"), "not JSON"),
]


@pytest.mark.parametrize("inline", [True, False], ids=["in-place stage 2", "scoped topic"])
def test_each_hostile_record_is_dead_lettered_naming_its_field_and_the_next_is_decided(inline: bool) -> None:
    pipe = MemoryPipeline(inline_scopes=inline)
    for name, record, phrase in HOSTILE:
        before = len(pipe.outputs[topics.DLQ])
        _feed(pipe, record)
        assert len(pipe.outputs[topics.DLQ]) == before + 1, name
        dead = _dead(pipe)[-1]
        assert dead[H_ERROR_TYPE] == "invalid_action", (name, dead)
        assert phrase in dead[H_ERROR_MESSAGE], (name, dead[H_ERROR_MESSAGE][:300])
    good = _record(params_json='{"to": "next@prospect.example", "subject": "s"}')
    _feed(pipe, good)
    assert pipe.decision_for(good["action_id"])["outcome"] == "APPROVED"
    assert pipe.keys.size() + pipe.scopes.size() == 1 + 1  # only the good action claimed anything


def test_an_unforeseen_error_is_the_records_dead_letter_and_changes_no_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever deciding raises for one record (here a bug planted in the core) is that record's
    dead letter, with the error's type, and leaves the state as it was."""
    import runonce.streams.processor as processor

    pipe = MemoryPipeline(inline_scopes=True)
    real = processor.decide_scope

    def broken(action: Any, *args: Any, **kwargs: Any) -> Any:
        if action.params.get("subject") == "boom":
            raise ZeroDivisionError("planted")
        return real(action, *args, **kwargs)

    monkeypatch.setattr(processor, "decide_scope", broken)
    bad = _record(params_json='{"to": "a@x", "subject": "boom"}')
    _feed(pipe, bad)
    [dead] = _dead(pipe)
    assert dead[H_ERROR_TYPE] == "unprocessable" and "ZeroDivisionError" in dead[H_ERROR_MESSAGE]
    assert pipe.keys.size() == pipe.scopes.size() == 0  # stage 1 had decided; nothing was written
    again = _record(params_json='{"to": "a@x", "subject": "fine"}')
    _feed(pipe, again)
    assert pipe.decision_for(again["action_id"])["outcome"] == "APPROVED"


def test_a_failing_state_store_or_unreadable_state_stops_the_worker() -> None:
    """runonce's own state is not the record's fault: those still raise (the worker exits)."""
    pipe = MemoryPipeline()

    def fail(*_: Any) -> None:
        raise OSError("disk gone")

    pipe.keys.get = fail  # type: ignore[method-assign]
    with pytest.raises(StateStoreFailed, match="disk gone"):
        _feed(pipe, _record(params_json='{"to": "a@x"}'))
    pipe = MemoryPipeline()
    record = _record("update_salesforce_field", '{"record_id": "r"}', idempotency_key="k")
    pipe.keys.parts[partition_for(b"k", pipe.partitions)][b"k"] = b"not json"
    with pytest.raises(InvariantViolation, match="unreadable"):
        _feed(pipe, record)


# -- one normal form ------------------------------------------------------------------------

def test_the_47_email_incident_with_case_and_unicode_variants_sends_one_email() -> None:
    """The seed's retrying caller, each retry spelling the lead's address another way."""
    nfc = "zoë@prospect.example"
    variants = [nfc, unicodedata.normalize("NFD", nfc), "Zoë@Prospect.example", " ZOË@PROSPECT.EXAMPLE ",
                unicodedata.normalize("NFD", "ZOË@prospect.EXAMPLE")]
    assert len(set(variants)) == len(variants)
    pipe = MemoryPipeline(inline_scopes=True)
    for i in range(47):
        to = variants[i % len(variants)]
        params = json.dumps({"to": to, "subject": "Following up", "body": "Hi Zoë"}, ensure_ascii=i % 2 == 0)
        # unkeyed retries meet on their content key; a framework minting a key per retry, in the window
        key = f"retry-{i}" if i % 3 == 2 else None
        _feed(pipe, _record(params_json=params, idempotency_key=key), t=T0 + i * 14_000)
    approved = pipe.decisions(topics.APPROVED)
    reasons = {d["reason"] for d in pipe.decisions(topics.DROPPED)}
    assert len(approved) == 1 and reasons == {"duplicate_key", "content_window"}, reasons
    assert json.loads(approved[0]["request"]["params_json"])["to"] == nfc  # executed as sent, not as compared


def test_normal_forms_leave_other_fields_and_other_tools_alone() -> None:
    pipe = MemoryPipeline(inline_scopes=True)
    for channel in ("#Ops", "#ops"):  # a channel is no email address: case matters
        _feed(pipe, _record("post_slack_message", json.dumps({"channel": channel, "text": "t"})))
    assert [d["reason"] for d in pipe.decisions(topics.APPROVED)] == ["unique", "unique"]


# -- bounded state ------------------------------------------------------------------------

def test_a_flood_of_distinct_emails_to_one_address_fills_its_scope_never_its_changelog() -> None:
    """Emails to one lead, each different, each from an action id as costly to store as allowed:
    the scope's state grows to its bound, then the next one is dead-lettered naming the scope
    (never a changelog record the broker refuses), and the scope works again once claims expire."""
    pipe = MemoryPipeline(inline_scopes=True)
    long_id = "é" * limits.MAX_ACTION_ID_CHARS  # the costliest action id to store: \u-escaped
    n = 0
    while not pipe.outputs[topics.DLQ] and n < 3_000:
        record = _record(params_json=json.dumps({"to": "lead@x", "body": f"#{n}"}),
                         action_id=f"{long_id[:-8]}{n:08d}")
        _feed(pipe, record, t=T0 + n)
        n += 1
    [dead] = _dead(pipe)
    assert dead[H_ERROR_TYPE] == "invalid_action" and "scope send_email:to=lead@x is full" in dead[H_ERROR_MESSAGE]
    assert len(pipe.decisions(topics.APPROVED)) == n - 1 > 300
    [state] = [v for part in pipe.scopes.parts.values() for v in part.values()]
    assert limits.MAX_SCOPE_STATE_BYTES - 4096 < len(state) <= limits.MAX_SCOPE_STATE_BYTES
    assert len(ScopeState.from_bytes(state).contents) == n - 1  # the refused one claimed nothing
    # a day later the claims have expired: the scope takes actions again
    later = _record(params_json=json.dumps({"to": "lead@x", "body": "tomorrow"}))
    _feed(pipe, later, t=T0 + 25 * 3600 * 1000)
    assert pipe.decision_for(later["action_id"])["outcome"] == "APPROVED"


# -- the fuzzer ------------------------------------------------------------------------------

_TOOLS = ["send_email", "charge_payment", "create_jira_ticket", "post_slack_message", "schedule_calendar_event",
          "restart_service", "update_salesforce_field", "execute_database_write"]


def _sized(alphabet: st.SearchStrategy[str], limit: int) -> st.SearchStrategy[str]:
    """Strings near a limit (just under, at, just over), far past it (1 M chars), or small."""
    near = st.sampled_from([limit - 1, limit, limit + 1, MB]).flatmap(
        lambda n: alphabet.map(lambda c: (c * n)[:n] if c else "x" * n))
    return st.one_of(st.text(max_size=20), near)


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                       st.text(max_size=20))
_json = st.recursive(_json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=20)


def _params_json() -> st.SearchStrategy[str]:
    scoped = st.fixed_dictionaries({}, optional={
        "to": _json, "channel": _json, "service": _json, "calendar_id": _json, "project": _json,
        "customer_id": _json, "description": _json, "start": _json, "attendees": _json, "amount": _json})
    valid = st.sampled_from(['{"to": "a@x", "subject": "s"}', '{"channel": "#c", "text": "t"}', '{"service": "api"}',
                             _HELD_EMAIL, _HELD_CHARGE,
                             '{"record_id": "r", "field": "f", "value": 1}', '{"card": "tok", "amount": 100}',
                             '{"project": "P", "customer_id": "c", "description": "d"}'])
    return st.one_of(
        valid,                                                                     # decided, if the rest is
        scoped.map(lambda d: json.dumps(d, allow_nan=True)),                     # valid-ish, NaN included
        st.one_of(st.integers(1, 200), st.sampled_from([2_000, 100_000])).map(  # depth
            lambda n: '{"to": "a@x", "n": ' + "[" * n + "]" * n + "}"),
        st.text(max_size=40),                                                      # not JSON at all
        st.sampled_from(['{"to": "a", "to": "b"}', '{"to": "\\udc80"}', '[1, 2]', '"s"', "{}",
                         '{"to": "a@x", "body": "' + "y" * (limits.MAX_PARAMS_BYTES - 30) + '"}',
                         '{"to": "a@x", "body": "' + "y" * limits.MAX_PARAMS_BYTES + '"}']),
    )


#: requests a person must approve first (policies.toml: more than 10 blind copies; over $10,000)
_HELD_EMAIL = json.dumps({"to": "a@x", "subject": "s", "bcc": [f"b{i}@x" for i in range(11)]})
_HELD_CHARGE = '{"card": "tok", "amount_cents": 2000000}'
_VALID = {  # a request each tool decides, hostile fields put into it below
    "send_email": '{"to": "a@x", "subject": "s"}', "post_slack_message": '{"channel": "#c", "text": "t"}',
    "restart_service": '{"service": "api"}', "update_salesforce_field": '{"record_id": "r", "field": "f"}',
    "charge_payment": '{"card": "tok", "amount": 100}', "execute_database_write": '{"sql": "x"}',
    "create_jira_ticket": '{"project": "P", "customer_id": "c", "description": "d"}',
    "schedule_calendar_event": '{"calendar_id": "c", "start": "s", "attendees": ["a"]}',
}
_hostile_fields = {
    "action_id": _sized(st.sampled_from(["a", "é", "\x00", "😀"]), limits.MAX_ACTION_ID_CHARS),
    "agent_id": _sized(st.sampled_from(["a", "é", "😀"]), limits.MAX_AGENT_ID_CHARS),
    "tool": _sized(st.sampled_from(["t", "\n", "é"]), limits.MAX_TOOL_CHARS),
    "params_json": _params_json(),
    "idempotency_key": st.one_of(st.none(), st.sampled_from(["k1", "k2", " "]),
                                 _sized(st.sampled_from(["k", "é"]), limits.MAX_KEY_CHARS)),
    "natural_id": st.one_of(st.none(), st.text(max_size=10),
                            _sized(st.sampled_from(["n", "\u0301", "😀"]), limits.MAX_NATURAL_ID_CHARS)),
    "requested_at_ms": st.integers(-(2 ** 63), 2 ** 63 - 1),
}


@st.composite
def _requests(draw: st.DrawFn) -> dict[str, Any]:
    """A valid request for some tool with one to three of its fields made hostile."""
    tool = draw(st.sampled_from(sorted(_VALID)))
    params = draw(st.sampled_from([_VALID[tool], *{"send_email": [_HELD_EMAIL], "charge_payment": [_HELD_CHARGE]}.get(
        tool, [])]))
    record = {**_record(tool, params), "idempotency_key": draw(st.sampled_from([None, "k1", "k2"]))}
    for name in draw(st.sets(st.sampled_from(sorted(_hostile_fields)), min_size=1, max_size=3)):
        record[name] = draw(_hostile_fields[name])
    return record


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=st.lists(_requests(), min_size=1, max_size=6), inline=st.booleans())
def test_fuzz_every_record_is_decided_or_dead_lettered_once_and_every_output_fits(
        batch: list[dict[str, Any]], inline: bool) -> None:
    pipe = MemoryPipeline(partitions=3, inline_scopes=inline)
    written: list[tuple[str, int]] = []
    process = pipe.pipeline.process

    dead: list[dict[str, bytes]] = []

    def recording(inbound: Inbound) -> Any:
        out = process(inbound)  # never raises: a raise fails the test here
        # the broker counts a record's headers toward max.message.bytes too
        written.append((out.topic, len(out.value) + len(out.key or b"")
                        + sum(len(k.encode()) + len(v or b"") for k, v in out.headers)))
        if out.topic == topics.DLQ:
            dead.append(dict(out.headers))
        return out

    pipe.pipeline.process = recording  # type: ignore[method-assign]
    values = [pipe.codec.encode("ActionRequested", record) for record in batch]
    assume(all(len(v) <= topics.MAX_RECORD_BYTES for v in values))  # the broker refuses bigger ones at produce
    for i, value in enumerate(values):
        pipe.feed_raw(value, key=None, timestamp_ms=T0 + i, partition=i % 3)
    finals = [t for t, _ in written if t in (topics.APPROVED, topics.DROPPED, topics.DLQ, topics.HELD)]
    assert len(finals) == len(batch)  # exactly one decision, hold or dead letter per record
    for topic, size in written:
        assert size <= TOPIC_LIMIT[topic], (topic, size)
    for headers in dead:  # where someone can find why: the error's type and message, in headers
        assert headers.get(H_ERROR_TYPE) and headers.get(H_ERROR_MESSAGE), headers
    for store in (pipe.keys, pipe.scopes, pipe.holds):
        for part in store.parts.values():
            for key, value in part.items():
                assert len(key) + len(value) <= CHANGELOG_LIMIT  # each changelog record fits
