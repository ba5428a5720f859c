"""The approvals page and its tokens, without Kafka: what a person sees and who they are.
(The page against the real broker, clicked in two Chromium sessions: tests/integration/test_approvals.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runonce import tokens
from runonce.approvals.client import HeldAction, VerdictSeen
from runonce.approvals.page import render
from runonce.core.approval import HoldStatus
from runonce.errors import ConfigError

T0 = 1_796_000_000_000


def held(action_id: str, status: HoldStatus = HoldStatus.HELD, by: str | None = None,
         verdicts: tuple[VerdictSeen, ...] = ()) -> HeldAction:
    return HeldAction(action_id, "charge_payment", {"card": "<script>x</script>", "amount_cents": 1_250_000},
                      "billing-bot", "amount_cents 1250000 > 1000000", T0, T0 + 86_400_000, status, by, verdicts)


def test_a_held_action_has_a_form_with_its_own_verdict_id_and_everything_is_escaped() -> None:
    page = render([held("a1"), held("a2")], "alice", "approve: changed nothing (already released by <bob>)", T0 + 90_000)
    ids = re.findall(r'name="verdict_id" value="([^"]+)"', page)
    assert len(ids) == 2 and len(set(ids)) == 2  # a double-submitted form is one verdict; two forms are two
    assert "<script>x</script>" not in page and "&lt;script&gt;" in page
    assert "already released by &lt;bob&gt;" in page and "<script" not in page
    assert 'data-status="held"' in page and "1m 30s" in page


def test_a_decided_action_shows_who_and_every_verdict_and_no_buttons() -> None:
    verdicts = (VerdictSeen("v1", "alice", "approve", "release", "", "", T0 + 5),
                VerdictSeen("v2", "bob", "approve", "none", "already released by alice", "", T0 + 6))
    page = render([held("a1", HoldStatus.RELEASED, "alice", verdicts)], "bob", "", T0)
    assert 'data-status="released"' in page and '<b data-decided-by>alice</b>' in page
    assert "<button" not in page and "already released by alice" in page


def _name(path: Path, token: str) -> str | None:
    holder = tokens.who(path, token)
    return holder.name if holder is not None else None


def test_tokens_are_kept_as_hashes_and_a_revoked_one_signs_no_one_in(tmp_path: Path) -> None:
    path = tmp_path / "approvers.tokens"
    alice, bob = tokens.add(path, "alice"), tokens.add(path, "bob")
    text = path.read_text()
    assert alice not in text and bob not in text and oct(path.stat().st_mode & 0o777) == "0o600"
    assert (_name(path, alice), _name(path, bob), _name(path, "guess")) == ("alice", "bob", None)
    renewed = tokens.add(path, "alice")  # a new link replaces the old one
    assert _name(path, alice) is None and _name(path, renewed) == "alice"
    assert tokens.revoke(path, "bob") and _name(path, bob) is None and not tokens.revoke(path, "bob")
    with pytest.raises(ConfigError, match="name 'no spaces please'"):
        tokens.add(path, "no spaces please")


def test_an_agent_token_names_the_tools_it_may_call(tmp_path: Path) -> None:
    path = tmp_path / "gateway.tokens"
    billing = tokens.add(path, "team:billing", frozenset({"charge_payment"}))
    anything = tokens.add(path, "ops", None)
    holder = tokens.who(path, billing)
    assert holder is not None and holder.name == "team:billing"
    assert holder.may_call("charge_payment") and not holder.may_call("send_email")
    everything = tokens.who(path, anything)
    assert everything is not None and everything.may_call("send_email")
    assert tokens.read(path)["team:billing"].tools == {"charge_payment"}  # the file round-trips
    path.write_text(path.read_text() + "mallory:not-a-hash\n")
    with pytest.raises(ConfigError, match=":3: expected name:sha256-hex"):
        tokens.who(path, billing)
