"""The approvals page and its tokens, without Kafka: what a person sees and who they are.
(The page against the real broker, clicked in two Chromium sessions: tests/integration/test_approvals.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runonce.approvals import tokens
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


def test_tokens_are_kept_as_hashes_and_a_revoked_one_signs_no_one_in(tmp_path: Path) -> None:
    path = tmp_path / "approvers.tokens"
    alice, bob = tokens.add(path, "alice"), tokens.add(path, "bob")
    text = path.read_text()
    assert alice not in text and bob not in text and oct(path.stat().st_mode & 0o777) == "0o600"
    assert (tokens.who(path, alice), tokens.who(path, bob), tokens.who(path, "guess")) == ("alice", "bob", None)
    renewed = tokens.add(path, "alice")  # a new link replaces the old one
    assert tokens.who(path, alice) is None and tokens.who(path, renewed) == "alice"
    assert tokens.revoke(path, "bob") and tokens.who(path, bob) is None and not tokens.revoke(path, "bob")
    with pytest.raises(ConfigError, match="approver name"):
        tokens.add(path, "no spaces please")
