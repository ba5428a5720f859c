"""local_state.py: a faust worker keeps its local tables only after a clean stop."""

from __future__ import annotations

from pathlib import Path

from runonce.streams.faust_runtime.local_state import CLEAN_STOP_MARK, close_local_state, open_local_state


def _tables(datadir: Path) -> Path:
    db = datadir / "v1" / "tables" / "keys-0.db"
    db.mkdir(parents=True)
    (db / "000004.log").write_bytes(b"claim")
    return db


def test_after_a_kill_the_local_tables_are_dropped(tmp_path: Path) -> None:
    db = _tables(tmp_path)
    assert open_local_state(tmp_path) is False
    assert not db.exists() and list(tmp_path.iterdir()) == []


def test_after_a_clean_stop_they_are_kept_until_the_next_kill(tmp_path: Path) -> None:
    db = _tables(tmp_path)
    close_local_state(tmp_path)
    assert open_local_state(tmp_path) is True
    assert (db / "000004.log").read_bytes() == b"claim"
    assert not (tmp_path / CLEAN_STOP_MARK).exists()  # this run must stop cleanly to be trusted
    assert open_local_state(tmp_path) is False and not db.exists()


def test_a_first_start_has_nothing_to_drop(tmp_path: Path) -> None:
    assert open_local_state(tmp_path / "new") is False
