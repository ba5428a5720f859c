"""The model of the CrewAI scripts (crew_retry.py, crew_resume.py): a ``BaseLLM`` that plays a
ReAct model from a script, as CrewAI's docs allow a custom LLM; no model server."""

import json
import uuid
from typing import Any

from crewai.llms.base_llm import BaseLLM


class ScriptedLLM(BaseLLM):
    """What CrewAI asks of a custom LLM besides ``call``: a text model, no stop words."""

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8000


def said(messages: Any) -> list[str]:
    """What the conversation so far says, message by message."""
    return [str(m.get("content")) for m in (messages if isinstance(messages, list) else [])]


def charged(messages: Any) -> bool:
    """Whether the tool has answered a charge in this conversation."""
    return any("charge_payment succeeded" in s or "Not performed again" in s for s in said(messages))


def charge(amount_cents: int) -> str:
    """The model's turn that charges ``amount_cents``, with a key of its own made up each time."""
    args = {"params": {"card": "tok_visa", "amount_cents": amount_cents}, "idempotency_key": uuid.uuid4().hex}
    return f"Thought: I charge the order\nAction: charge_payment\nAction Input: {json.dumps(args)}"


DONE = "Thought: the charge is made\nFinal Answer: charged"
