"""A crew resumed from its checkpoint after its process died mid-task, in CrewAI's own process
(a scripted ``BaseLLM`` plays the model). Run by tests/integration/test_ways_in.py in the
CrewAI venv (scripts/setup.sh).

    python crew_resume.py first|resume AMOUNT_CENTS CHECKPOINT_DIR

``first``: a crew of two tasks that checkpoints when a task completes; the first task charges
AMOUNT_CENTS, the second AMOUNT_CENTS + 1, and the process dies (``os._exit``) as soon as the
second charge is answered: its newest checkpoint is the first task's.
``resume``: the crew restored from that checkpoint (``Crew.from_checkpoint``), its agent given
its model and runonce's tools again (neither is in a checkpoint), kicked off: CrewAI runs the
second task again, and its charge. Prints one JSON line per tool answer."""


import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.update(CREWAI_DISABLE_TELEMETRY="true", OTEL_SDK_DISABLED="true", CREWAI_TRACING_ENABLED="false")

from crewai.hooks import register_after_tool_call_hook  # noqa: E402
from crewai.state.checkpoint_config import CheckpointConfig  # noqa: E402
from scripted import DONE, ScriptedLLM, charge, charged, said  # noqa: E402

from crewai import Agent, Crew, Task  # noqa: E402
from runonce.integrations.crewai import crewai_tools  # noqa: E402
from runonce.sdk.client import ActionClient  # noqa: E402

MODE, AMOUNT, CHECKPOINTS = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])


class Scripted(ScriptedLLM):
    """Charges the amount its task names until it has seen the tool's answer, then answers."""

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None, **_: Any) -> str:
        if charged(messages):
            return DONE
        return charge(AMOUNT + 1 if any("second order" in s for s in said(messages)) else AMOUNT)


def answered(ctx: Any) -> None:
    if not ctx.tool_result:
        return
    print(json.dumps({"answer": str(ctx.tool_result), "params": ctx.tool_input.get("params")}), flush=True)
    if MODE == "first" and ctx.tool_input.get("params", {}).get("amount_cents") == AMOUNT + 1:
        os._exit(3)  # the process dies mid-task: the second task never completes


with ActionClient(os.environ["RUNONCE_BOOTSTRAP"], agent_id="crewai-agent") as client:
    tools = crewai_tools(client, timeout_s=60, only={"charge_payment"})
    register_after_tool_call_hook(answered)
    if MODE == "first":
        agent = Agent(role="billing", goal="charge the orders", backstory="a billing clerk",
                      llm=Scripted(model="scripted"), tools=tools)
        tasks = [Task(description=f"Charge the {which} order", expected_output="that it is charged", agent=agent)
                 for which in ("first", "second")]
        Crew(agents=[agent], tasks=tasks,
             checkpoint=CheckpointConfig(location=str(CHECKPOINTS), on_events=["task_completed"])).kickoff()
        sys.exit("the second task completed: the process should have died in it")
    newest = max((p for p in CHECKPOINTS.rglob("*") if p.is_file()), key=lambda p: p.stat().st_mtime)
    crew = Crew.from_checkpoint(CheckpointConfig(restore_from=str(newest)))
    for agent in crew.agents:
        agent.llm = Scripted(model="scripted")  # the tools are restored: the hook serves them
    crew.kickoff()
