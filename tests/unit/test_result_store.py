"""The executor's results index on disk (runonce/connectors/executor/result_store.py), on a real
RocksDB: entries and their offsets in one batch, what survives a reopen, the key window, and
pruning by time."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from runonce.connectors.executor.result_store import IndexEntry, ResultStore
from runonce.wire.results import Result, Status

DAY_MS = 24 * 3600 * 1000
NOW = 1_800_000_000_000
OK = Result(Status.SUCCEEDED, "ch_1", None, 1)


def test_a_reopened_store_answers_what_it_was_told_and_where_it_stands(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "idx", key_window_ms=DAY_MS)
    store.write([IndexEntry("a1", "k1", Result(Status.ATTEMPTING), NOW), IndexEntry("a2", "k2", OK, NOW)], {0: 7, 3: 2})
    store.write([IndexEntry("a1", "k1", Result(Status.FAILED, None, "card declined: ünïcode", 2), NOW + 1)], {0: 9})
    store.close()

    again = ResultStore(tmp_path / "idx", key_window_ms=DAY_MS)
    assert again.result("a1") == Result(Status.FAILED, None, "card declined: ünïcode", 2)
    assert again.result("a2") == OK
    assert again.result("a3") is None
    assert again.first_user("k2", NOW) == "a2"
    assert again.next_offsets() == {0: 9, 3: 2}


def test_a_vendor_key_keeps_its_first_user_within_the_window_and_is_free_after_it(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "idx", key_window_ms=DAY_MS)
    store.write([IndexEntry("first", "k", OK, NOW)], {})
    store.write([IndexEntry("second", "k", OK, NOW + 1000)], {})
    assert store.first_user("k", NOW + 1000) == "first"
    # the stream job approves the key again after its TTL, on purpose: no answer, and a new claim
    assert store.first_user("k", NOW + DAY_MS + 1) is None
    store.write([IndexEntry("third", "k", OK, NOW + DAY_MS + 1)], {})
    assert store.first_user("k", NOW + DAY_MS + 1) == "third"


def test_pruning_removes_what_is_older_than_the_cutoff_and_keeps_a_later_result(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "idx", key_window_ms=DAY_MS)
    store.write([IndexEntry("old", "k-old", OK, NOW), IndexEntry("renewed", "k-renewed", Result(Status.ATTEMPTING), NOW)], {})
    store.write([IndexEntry("renewed", "k-renewed", OK, NOW + DAY_MS)], {})
    store.write([IndexEntry("young", "k-young", OK, NOW + DAY_MS)], {1: 5})
    assert store.drop_before(NOW + 1) == 2
    assert store.result("old") is None and store.first_user("k-old", NOW) is None
    assert store.result("renewed") == OK  # its latest result is younger than the cutoff
    assert store.result("young") == OK and store.first_user("k-young", NOW + DAY_MS) == "young"
    assert store.next_offsets() == {1: 5}
    assert store.drop_before(NOW + 1) == 0


def test_pruning_goes_in_bounded_steps(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "idx", key_window_ms=DAY_MS)
    store.write([IndexEntry(f"a{i}", f"k{i}", OK, NOW + i) for i in range(25)], {})
    assert [store.drop_before(NOW + 100, limit=10) for _ in range(4)] == [10, 10, 5, 0]
    assert all(store.result(f"a{i}") is None for i in range(25))


def test_a_wiped_store_is_empty_and_usable(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "idx", key_window_ms=DAY_MS)
    store.write([IndexEntry("a", "k", OK, NOW)], {0: 3})
    store.wipe()
    assert store.result("a") is None and store.next_offsets() == {}
    store.write([IndexEntry("b", "k", OK, NOW)], {0: 1})
    assert store.first_user("k", NOW) == "b"


# A model: the latest result per action, and each key's first user within the window.
actions = st.sampled_from([f"a{i}" for i in range(6)])
keys = st.sampled_from([f"k{i}" for i in range(3)])
results = st.builds(Result, st.sampled_from(list(Status)), st.none() | st.text(max_size=5),
                    st.none() | st.text(max_size=5), st.integers(0, 5))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(actions, keys, results, st.integers(0, 3 * DAY_MS)), max_size=30))
def test_the_store_answers_as_a_model_of_latest_results_and_first_users(tmp_path_factory, writes) -> None:
    store = ResultStore(tmp_path_factory.mktemp("idx"), key_window_ms=DAY_MS)
    latest: dict[str, Result] = {}
    claims: dict[str, tuple[str, int]] = {}
    at = NOW
    for action_id, key, result, step_ms in writes:
        at += step_ms
        store.write([IndexEntry(action_id, key, result, at)], {})
        latest[action_id] = result
        if key not in claims or claims[key][1] < at - DAY_MS:
            claims[key] = (action_id, at)
    for action_id in {a for a, *_ in writes}:
        assert store.result(action_id) == latest[action_id]
    for key, (first, claimed_at) in claims.items():
        assert store.first_user(key, at) == (first if claimed_at >= at - DAY_MS else None)
    store.close()
