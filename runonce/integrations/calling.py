"""What every framework adapter does with one tool call: submit it through the SDK, wait for
the outcome, and put it in the words a model reads (``runonce.tools.answers``) with the
same facts as data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from runonce.errors import ResultTimeout
from runonce.sdk.client import ActionClient, Handle
from runonce.tools.answers import Answer, answer, waiting_for_approval
from runonce.tools.specs import KEY_ARGUMENT, ToolSpec, served_tools


@dataclass(frozen=True, slots=True)
class Served:
    """One tool as a framework shows it to a model."""

    spec: ToolSpec
    client: ActionClient

    @property
    def name(self) -> str:
        return self.spec.name

    def submit(self, arguments: Mapping[str, Any]) -> Handle:
        params = dict(arguments)
        key = params.pop(KEY_ARGUMENT, None)
        return self.client.submit(self.spec.name, params, idempotency_key=key)

    def answer(self, handle: Handle, timeout_s: float) -> Answer:
        """The outcome's answer; ResultTimeout (a TimeoutError) if there is none within
        ``timeout_s``, which is what a framework's retry-on-timeout retries on: calling
        again publishes a repeat, which resolves to this call's result."""
        try:
            return answer(self.spec.name, handle.result(timeout_s))
        except ResultTimeout:
            held = handle.held
            if held is None:
                raise
            return waiting_for_approval(self.spec.name, handle.action_id, held)


def served(client: ActionClient, only: set[str] | None = None) -> list[Served]:
    """The policies' served tools (``only``: these names), each bound to ``client``."""
    return [Served(spec, client) for spec in served_tools(client.policies) if only is None or spec.name in only]
