from __future__ import annotations

import pytest

from runonce.core.policy import KeyMode, PolicyBook, WindowMode
from runonce.errors import ConfigError, InvalidAction


def test_shipped_policies_cover_the_seven_tools_restart_and_the_refund() -> None:
    book = PolicyBook.load()
    assert set(book.tools) == {"send_email", "charge_payment", "create_jira_ticket", "update_salesforce_field",
                               "post_slack_message", "schedule_calendar_event", "execute_database_write",
                               "restart_service", "issue_refund"}
    assert book.tools["issue_refund"].natural_id is not None
    assert book.tools["send_email"].content_window.window_ms == 24 * 3_600_000
    assert book.tools["send_email"].content_window.mode is WindowMode.STRICT
    assert book.tools["charge_payment"].key_mode is KeyMode.REQUIRE
    assert book.tools["post_slack_message"].content_window.mode is WindowMode.AUDIT
    assert book.tools["post_slack_message"].content_window.window_ms == 5 * 60_000
    assert book.tools["execute_database_write"].denied
    assert book.tools["restart_service"].budget.max_actions == 5
    assert book.tools["restart_service"].budget.window_ms == 20 * 60_000


def test_unknown_tools_take_the_default_under_their_own_name() -> None:
    policy = PolicyBook.load().for_tool("book_flight")
    assert policy.tool == "book_flight" and not policy.named and policy.key_mode is KeyMode.DERIVE


@pytest.mark.parametrize("toml, message", [
    ('[tools.send_email]\nkey = "maybe"', r"\[tools.send_email\].key: expected one of 'derive', 'require', 'none'"),
    ('[tools.x]\nscope=["a"]\ncontent_window = { window = "soon" }', r"\[tools.x\].content_window.window: expected a positive duration"),
    ('[tools.x]\nbudget = { max = 5, window = "1h" }', r"\[tools.x\]: natural_id, content_window and budget need a scope"),
    ('[tools.x]\nscope=["s"]\nbudget = { max = 0, window = "1h" }', r"\[tools.x\].budget.max: expected a positive integer"),
    ('[tools.x]\nwindow = "1h"', r"\[tools.x\]: unknown field\(s\) window"),
    ('[tools.x]\nscope=["s"]\nnatural_id = { fields = ["a"] }', r"\[tools.x\].natural_id: missing field\(s\) ttl"),
    ('[tools.pay]\napproval = { above = { amount_cents = 500 } }', r"\[tools.pay\].approval: missing field\(s\) expires"),
    ('[tools.pay]\napproval = { above = { amount_cents = "lots" }, expires = "24h" }',
     r"\[tools.pay\].approval.above.amount_cents: expected a number"),
    ('[tools.mail]\napproval = { max_items = { to = -1 }, expires = "1h" }',
     r"\[tools.mail\].approval.max_items.to: expected a whole number"),
    ('[tools.pay]\napproval = { always = true, above = { amount_cents = 5 }, expires = "1h" }',
     r"\[tools.pay\].approval: say when approval is needed"),
    ('[tools.pay]\napproval = { expires = "1h" }', r"\[tools.pay\].approval: say when approval is needed"),
    ('[tools.pay]\napproval = { always = true, expires = "never" }', r"\[tools.pay\].approval.expires: expected a positive"),
    ('[default]\napproval = { always = true, expires = "1h" }', r"\[default\] takes only"),
    ("[tools.x\n", "not valid TOML"),
    ("[toolz.x]\n", "unknown top-level table"),
])
def test_errors_name_the_tool_and_the_field(toml: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PolicyBook.from_toml(toml, "p.toml")


def test_missing_policy_file_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read policy file"):
        PolicyBook.load(tmp_path / "nope.toml")


def test_scope_and_natural_id_need_their_params_fields() -> None:
    jira = PolicyBook.load().tools["create_jira_ticket"]
    with pytest.raises(InvalidAction, match="needs params field 'customer_id'"):
        jira.scope_key({"project": "P"}, "a1")
    nid1 = jira.natural_id_for({"project": "P", "customer_id": "c", "description": "d"}, None, "a")
    nid2 = jira.natural_id_for({"description": "d", "customer_id": "c", "project": "P", "x": 1}, None, "b")
    assert nid1 == nid2  # only the rule's fields count
    assert jira.natural_id_for({}, "EXPLICIT-1", "a") == "create_jira_ticket:nid=EXPLICIT-1"


def test_long_scopes_are_hashed() -> None:
    email = PolicyBook.load().tools["send_email"]
    assert email.scope_key({"to": "a@b.c"}, "x") == "send_email:to=a@b.c"
    assert email.scope_key({"to": "a" * 500}, "x").startswith("send_email:sha256=")


def test_scope_of_is_what_stage_2_decides_on() -> None:
    book = PolicyBook.load()
    params = {"project": "P", "customer_id": "c", "description": "d"}
    scope, nid = book.for_tool("create_jira_ticket").scope_of(params, None, "a")
    assert scope == "create_jira_ticket:project=P&customer_id=c"
    assert nid == book.for_tool("create_jira_ticket").natural_id_for(params, None, "a")
    # A tool without scope rules is decided by stage 1 alone ...
    assert book.for_tool("charge_payment").scope_of({"card": "x"}, None, "a") == (None, None)
    # ... and a natural id given to it is broken input, not something to ignore.
    with pytest.raises(InvalidAction, match="no write-once rule"):
        book.for_tool("charge_payment").scope_of({"card": "x"}, "N-1", "a")


@pytest.mark.parametrize("text", ["24h", "5m", "30d", "1500ms", "90s"])
def test_durations_format_back_to_what_parses_them(text: str) -> None:
    from runonce.core.policy import format_duration, parse_duration_ms

    ms = parse_duration_ms(text, "t")
    assert parse_duration_ms(format_duration(ms), "t") == ms


def test_an_approval_rule_says_why_an_action_needs_a_person() -> None:
    book = PolicyBook.from_toml('[tools.pay]\napproval = { above = { amount_cents = 50000 }, expires = "24h" }\n'
                                '[tools.mail]\napproval = { max_items = { to = 3 }, expires = "1h" }\n'
                                '[tools.restart]\napproval = { always = true, expires = "15m" }')
    pay, mail, restart = (book.for_tool(t).approval for t in ("pay", "mail", "restart"))
    assert pay is not None and mail is not None and restart is not None
    assert pay.expires_ms == 24 * 3_600_000
    assert pay.why({"amount_cents": 75_000}) == "amount_cents 75000 > 50000"
    assert pay.why({"amount_cents": 50_000}) is None and pay.why({"amount_cents": "75000"}) is None
    assert mail.why({"to": ["a", "b", "c", "d"]}) == "to has 4 items > 3"
    assert restart.why({}) == "always"
    assert book.for_tool("other").approval is None


def test_a_policy_file_adds_to_and_overrides_the_shipped_policies(tmp_path) -> None:
    """Catches ``PolicyBook.load(path)`` back to replacing the shipped set (a user had to copy the
    shipped file out of the installed package to add one tool)."""
    from runonce.tools.specs import served_tools

    path = tmp_path / "policies.toml"
    path.write_text('[tools.open_ticket]\nkey = "require"\n\n[tools.send_email]\nkey = "none"\n')
    book, shipped = PolicyBook.load(path), PolicyBook.load()
    assert book.for_tool("open_ticket").named and book.for_tool("open_ticket").key_mode is KeyMode.REQUIRE
    assert book.for_tool("send_email").key_mode is KeyMode.NONE  # the user's table replaces the shipped one
    assert book.for_tool("send_email").content_window is None
    assert book.for_tool("charge_payment") == shipped.for_tool("charge_payment")  # the rest kept
    assert book.default == shipped.default
    assert "open_ticket" in {spec.name for spec in served_tools(book)}  # the gateway serves it


def test_replace_shipped_makes_a_policy_file_stand_alone(tmp_path) -> None:
    path = tmp_path / "policies.toml"
    path.write_text('replace_shipped = true\n[default]\ndenied = true\n[tools.open_ticket]\nkey = "require"\n')
    book = PolicyBook.load(path)
    assert set(book.tools) == {"open_ticket"} and book.for_tool("charge_payment").denied


def test_a_mistake_in_a_policy_file_names_that_file(tmp_path) -> None:
    path = tmp_path / "policies.toml"
    path.write_text('[tools.open_ticket]\nkey = "sometimes"\n')
    with pytest.raises(ConfigError, match=rf"^{path}: \[tools\.open_ticket\]"):
        PolicyBook.load(path)
