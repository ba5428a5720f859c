"""The executor's arena cap: applied on glibc, never over an operator's own choice."""

from __future__ import annotations

import pytest

from runonce.ops.malloc_arenas import cap_malloc_arenas


def test_an_operators_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert cap_malloc_arenas() is False


def test_glibc_takes_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert cap_malloc_arenas() is True  # this machine's Python runs on glibc
