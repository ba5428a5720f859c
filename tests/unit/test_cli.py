from __future__ import annotations

import pytest

from runonce.ops.cli import build_parser, main

COMMANDS = ["broker", "topics", "acl", "worker", "executor", "sandbox", "up", "down", "status", "submit", "tail", "verify", "stats", "demo", "mcp", "export", "observe", "report", "audit", "approvals", "gateway", "connectors"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: runonce {command}" in out and len(out.splitlines()) > 3


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(c in out for c in COMMANDS)
    # argparse lists its subcommands only through its privates
    assert set(build_parser()._subparsers._group_actions[0].choices) == set(COMMANDS)  # type: ignore[union-attr]  # noqa: SLF001


def test_no_broker_address_is_a_clear_error(tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RUNONCE_HOME", str(tmp_path))
    monkeypatch.delenv("RUNONCE_BOOTSTRAP", raising=False)
    assert main(["verify"]) == 2
    assert "no broker address: set RUNONCE_BOOTSTRAP or start the local broker" in capsys.readouterr().err


def test_gateway_tokens_are_added_listed_and_revoked_and_never_stored(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gateway.tokens"
    assert main(["gateway", "token", "add", "billing-agent", "--tools", "charge_payment,send_email",
                 "--tokens", str(path)]) == 0
    token = capsys.readouterr().out.strip()
    assert len(token) >= 32 and token not in path.read_text()
    assert main(["gateway", "token", "list", "--tokens", str(path)]) == 0
    assert capsys.readouterr().out == "billing-agent\tcharge_payment,send_email\ttenant billing-agent\n"
    assert main(["gateway", "token", "revoke", "billing-agent", "--tokens", str(path)]) == 0
    assert main(["gateway", "token", "revoke", "billing-agent", "--tokens", str(path)]) == 1
    assert main(["gateway", "token", "--tokens", str(path)]) == 2  # which token action: a clear error


def test_a_command_whose_extra_is_not_installed_says_which_extra(
        tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    monkeypatch.setenv("RUNONCE_HOME", str(tmp_path))
    for name in [m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "runonce.gateway"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if `pip install runonce` alone
    assert main(["gateway", "serve", "--tokens", str(tmp_path / "t")]) == 2
    assert "needs the 'gateway' extra: pip install 'runonce[gateway]'" in capsys.readouterr().err


def test_connectors_check_of_a_missing_file_names_the_file_not_the_variable(
        tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches the --file case falling through to the default's hint ("set RUNONCE_CONNECTORS")."""
    monkeypatch.setenv("RUNONCE_HOME", str(tmp_path))
    missing = tmp_path / "nowhere.toml"
    assert main(["connectors", "check", "--file", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"--file {missing}: no such file" in err and "RUNONCE_CONNECTORS" not in err, err


def test_token_add_refuses_a_tool_no_policy_names_and_suggests_the_near_one(
        tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches ``token add`` storing a misspelt tool (the agent then meets 404 on every call)."""
    monkeypatch.setenv("RUNONCE_HOME", str(tmp_path))
    path = tmp_path / "gateway.tokens"
    assert main(["gateway", "token", "add", "billing-agent", "--tools", "chrage_payment", "--tokens", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no policy names chrage_payment (did you mean charge_payment?)" in err and not path.exists(), err
    policies = tmp_path / "policies.toml"
    policies.write_text('[tools.open_ticket]\nkey = "require"\n')
    monkeypatch.setenv("RUNONCE_POLICY_FILE", str(policies))
    assert main(["gateway", "token", "add", "helpdesk", "--tools", "open_ticket,send_email", "--tokens", str(path)]) == 0


def test_gateway_serve_warns_of_a_tokens_tool_that_no_policy_names(tmp_path) -> None:
    from runonce import tokens
    from runonce.core.policy import PolicyBook
    from runonce.ops.gateway_cli import token_warnings

    path = tmp_path / "gateway.tokens"
    tokens.add(path, "helpdesk", frozenset({"open_ticket", "send_email"}))
    tokens.add(path, "anyone", None)
    warned = token_warnings(tokens.read(path), PolicyBook.load())
    assert warned == ["agent helpdesk's token allows open_ticket, which no policy names: calls answer 404 until a "
                      "policy file (RUNONCE_POLICY_FILE) has a [tools.NAME] table"], warned
    policies = tmp_path / "policies.toml"
    policies.write_text('[tools.open_ticket]\nkey = "require"\n')
    assert token_warnings(tokens.read(path), PolicyBook.load(policies)) == []


def test_an_approvers_sign_in_link_points_at_the_page_this_home_serves(
        tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches: a link on the default port (8470) whatever port the page serves (docs/policies.md
    serves 8471): `approvals serve` records its address in RUNONCE_HOME, `token` links to it;
    --port names another."""
    monkeypatch.setenv("RUNONCE_HOME", str(tmp_path))
    tokens = ["--tokens", str(tmp_path / "approvers.tokens")]
    assert main(["approvals", "token", "alice", *tokens]) == 0
    assert "sign-in link: http://127.0.0.1:8470/?token=" in capsys.readouterr().out  # no page served yet
    (tmp_path / "approvals-page.url").write_text("http://127.0.0.1:8471\n")  # what `approvals serve --port 8471` writes
    assert main(["approvals", "token", "bob", *tokens]) == 0
    assert "sign-in link: http://127.0.0.1:8471/?token=" in capsys.readouterr().out
    assert main(["approvals", "token", "carol", "--port", "9000", *tokens]) == 0
    assert "sign-in link: http://127.0.0.1:9000/?token=" in capsys.readouterr().out
