from __future__ import annotations

import pytest

from runonce.ops.cli import build_parser, main

COMMANDS = ["broker", "topics", "acl", "worker", "executor", "sandbox", "up", "down", "status", "submit", "tail", "verify", "stats", "demo", "mcp", "export", "observe", "report", "approvals"]


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
    assert set(build_parser()._subparsers._group_actions[0].choices) == set(COMMANDS)  # type: ignore[union-attr]


def test_no_broker_address_is_a_clear_error(tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RUNONCE_HOME", str(tmp_path))
    monkeypatch.delenv("RUNONCE_BOOTSTRAP", raising=False)
    assert main(["verify"]) == 2
    assert "no broker address: set RUNONCE_BOOTSTRAP or start the local broker" in capsys.readouterr().err
