"""The key of a tool call's place (runonce/integrations/keys.py), which every framework adapter
derives its keys from. Catches ``derive`` leaving the run (a thread, a workflow run) out of the
key: two threads whose models picked the same tool-call id would share one key, and the second
thread's call would be dropped as the first's repeat."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from runonce.integrations.keys import derive

part = st.text(min_size=1, max_size=12)


@given(part, part, part)
def test_two_runs_with_the_same_tool_call_id_get_two_keys(run_a: str, run_b: str, call_id: str) -> None:
    assume(run_a != run_b)
    assert derive("langgraph", (run_a,), (call_id,)).key != derive("langgraph", (run_b,), (call_id,)).key


@given(part, part, part, part)
def test_one_place_is_one_key_and_two_places_are_two(run_a: str, call_a: str, run_b: str, call_b: str) -> None:
    """A retry of the same place gets the same key; a ``/`` inside a part never makes two places meet."""
    a, b = derive("crewai", (run_a,), (call_a,)), derive("crewai", (run_b,), (call_b,))
    assert a == derive("crewai", (run_a,), (call_a,))
    assert (a.key == b.key) == ((run_a, call_a) == (run_b, call_b))
