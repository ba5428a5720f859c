"""The one normal form of identity (core/normal.py), where it decides: two actions whose strings
differ only in Unicode composition, at any depth and in keys too, are one content; an email
address in another case, ß included, is one recipient."""

from __future__ import annotations

import unicodedata

import pytest

from runonce.core.action import Action
from runonce.core.decide import scope_of
from runonce.core.policy import PolicyBook
from runonce.sdk.submit import build_request

BOOK = PolicyBook.load()


def _action(tool: str, params: dict[str, object]) -> Action:
    return Action.from_record(build_request(tool, params, agent_id="a"), BOOK)


def _nfd(value: object) -> object:
    if isinstance(value, str):
        return unicodedata.normalize("NFD", value)
    if isinstance(value, dict):
        return {_nfd(k): _nfd(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nfd(v) for v in value]
    return value


@pytest.mark.parametrize("params", [
    {"to": "josé@example.com", "subject": "Café"},
    {"to": "j@example.com", "body": "Crème brûlée", "meta": {"ünïcode-kéy": ["naïve", {"déjà": "vu"}]}},
])
def test_every_string_at_every_depth_keys_too_is_compared_in_nfc(params: dict[str, object]) -> None:
    composed, decomposed = _action("send_email", params), _action("send_email", _nfd(params))  # type: ignore[arg-type]
    assert _nfd(params) != params  # the test's input really differs in composition
    assert composed.content_hash == decomposed.content_hash
    assert scope_of(composed, BOOK.for_tool("send_email")) == scope_of(decomposed, BOOK.for_tool("send_email"))


def test_an_email_address_in_another_case_is_one_recipient_sharp_s_included() -> None:
    policy = BOOK.for_tool("send_email")
    same = [_action("send_email", {"to": to, "subject": "s"}) for to in
            ("Straße@Example.com", "STRASSE@EXAMPLE.COM", " strasse@example.com ")]
    assert len({scope_of(a, policy)[0] for a in same}) == 1
    assert len({a.content_hash for a in same}) == 1
    other = _action("send_email", {"to": "strase@example.com", "subject": "s"})
    assert scope_of(other, policy)[0] != scope_of(same[0], policy)[0]
