"""runonce: make "run twice" impossible for the actions AI agents take.

The agent SDK is ``runonce.ActionClient`` (see ``runonce/sdk/client.py``). It is imported
lazily, so ``runonce.core`` (the pure decision core) never pulls in Kafka.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ActionClient", "ActionOutcome", "Call", "Handle"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from runonce.sdk import client

        return getattr(client, name)
    raise AttributeError(f"module 'runonce' has no attribute {name!r}")
