"""What runonce's code tells its tracer, and the tracer of a process that traces nothing.

Every method takes the W3C context headers a record carries (wire/trace.py) and returns the
headers to put on what is written next: without tracing, the same context, carried on;
with it, the context of the span just made, so the next step is its child."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Protocol

from runonce.wire.trace import Decided, TraceHeaders, Waited, carried

#: what an execution tells its span when the vendor has answered: the final status
#: (``succeeded``, ``failed``, ``in_doubt``) and the vendor calls it took; never the vendor's
#: words, which may quote input
Finish = Callable[[str, int], None]


class DecisionSpans(Protocol):
    """The stream job's spans (streams/processor.py, streams/holds.py)."""

    #: whether spans are made at all: when not, a caller skips gathering what a span would show
    recording: bool

    def decide(self, request: TraceHeaders, decided: Decided) -> TraceHeaders:
        """One decision, a child of its request's span (a repeat's linked to the first's)."""
        ...

    def wait(self, held: TraceHeaders, waited: Waited) -> TraceHeaders:
        """A held action's wait for a person, ended: a child of the hold's decision."""
        ...


class Spans(DecisionSpans, Protocol):
    """Every span runonce makes: the stream job's, an agent's submit, an executor's execution."""

    def submit(self, tool: str, action_id: str, caller: TraceHeaders) -> contextlib.AbstractContextManager[TraceHeaders]:
        """Around publishing a request: a producer span, child of the caller's context."""
        ...

    def execute(self, approved: TraceHeaders, tool: str, action_id: str,
                capability: str) -> contextlib.AbstractContextManager[Finish]:
        """Around performing an approved action (``execute_tool {tool}``); the vendor's requests
        made inside are its children."""
        ...


class NoSpans:
    """No tracer: the caller's context is carried on, unchanged."""

    recording = False

    @contextlib.contextmanager
    def submit(self, tool: str, action_id: str, caller: TraceHeaders) -> Iterator[TraceHeaders]:
        yield carried(caller)

    def decide(self, request: TraceHeaders, decided: Decided) -> TraceHeaders:
        return carried(request)

    def wait(self, held: TraceHeaders, waited: Waited) -> TraceHeaders:
        return carried(held)

    @contextlib.contextmanager
    def execute(self, approved: TraceHeaders, tool: str, action_id: str, capability: str) -> Iterator[Finish]:
        yield _nothing


def _nothing(status: str, attempts: int) -> None:
    return None


NO_SPANS = NoSpans()
