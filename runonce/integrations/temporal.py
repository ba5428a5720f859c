"""runonce actions from Temporal activities (``pip install 'runonce[temporal]'``).

    from runonce.integrations.temporal import perform

    @activity.defn
    async def charge(order: Order) -> str:
        outcome = await perform(client, "charge_payment", {"card": order.card, "amount_cents": order.cents})
        return outcome.vendor_ref

Temporal retries an activity that failed or timed out, and a worker that died mid-activity
leaves it to be run again: each attempt runs the function from its start (pydantic-ai #5536:
an approved tool re-run). Temporal's docs recommend the workflow run id and the activity id
as an activity's idempotency key: both are the same on every attempt (only ``attempt``
grows). ``perform`` derives the action's key from them (``keys.derive``), so a second attempt
is a repeat, answered with the first attempt's outcome. A reset workflow is a new run: its
activities are new actions, as a reset means. A standalone activity (no workflow) is keyed by
its activity id and ``activity_run_id``."""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from temporalio import activity

from runonce.integrations.keys import Derived, derive
from runonce.sdk.client import ActionClient, ActionOutcome


def place_of(info: activity.Info, hint: str | None = None, *, keeps_natural_ids: bool = False) -> Derived:
    if info.workflow_id:
        run = (info.workflow_namespace or info.namespace, info.workflow_id, info.workflow_run_id or "")
    else:
        run = (info.namespace, "standalone", info.activity_run_id or "")
    return derive("temporal", run, (info.activity_id,), hint, keeps_natural_ids=keeps_natural_ids)


async def perform(client: ActionClient, tool: str, params: Mapping[str, Any], *, hint: str | None = None,
                  timeout_s: float = 60.0) -> ActionOutcome:
    """Submit this activity's action and wait for its outcome; call it from inside an activity.
    Raises ResultTimeout (a TimeoutError: Temporal retries it, and the retry is a repeat)."""
    derived = place_of(activity.info(), hint, keeps_natural_ids=client.policies.for_tool(tool).natural_id is not None)
    handle = await asyncio.to_thread(client.submit, tool, dict(params), idempotency_key=derived.key,
                                     natural_id=derived.natural_id)
    return await asyncio.to_thread(handle.result, timeout_s)
