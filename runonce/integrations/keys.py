"""Keys an agent cannot get wrong: what a framework keeps stable across a retry or a replay.

A key the model writes is not one: a model told to make a fresh key per request (the square
MCP server's tools) makes a new one on every retry, a retried CrewAI task rewrites the prompt
and so the arguments, and a tool-call id is new on every turn (the OpenAI Agents SDK). What is
stable is the call's place in the framework's own durable record: a LangGraph thread, its
checkpoint namespace and the tool call in the checkpointed message; a Temporal workflow run
and the activity's id in it. A retry or a replay of that place is the same action.

The model's own key, if it gives one, is kept as a hint: the action's natural id, scoped under
the run (``Derived.natural_id``), for a tool whose policy keeps natural ids (a write-once rule):
a model naming the same key again on a later turn of the same run is answered with the first
call's result; where it makes up a new key, the place still holds. For other tools the hint is
dropped: the place is the key."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Derived:
    """The idempotency key of one tool call's place, and the model's key scoped under its run."""

    key: str
    natural_id: str | None


def derive(framework: str, run: tuple[str, ...], call: tuple[str, ...], hint: str | None = None,
           *, keeps_natural_ids: bool = False) -> Derived:
    """``run``: what names the framework's durable run (a thread, a workflow run); ``call``:
    this call's place in it (a checkpoint namespace and tool-call id, an activity id).
    ``keeps_natural_ids``: the tool's policy has a write-once rule (``Policy.natural_id``).
    Each part is quoted, so no two places meet by a ``/`` inside one of them."""
    scope = "/".join(quote(part, safe="") for part in (framework, *run))
    place = "/".join(quote(part, safe="") for part in call)
    natural_id = f"{scope}/hint/{quote(hint, safe='')}" if hint and keeps_natural_ids else None
    return Derived(f"{scope}/{place}", natural_id)
