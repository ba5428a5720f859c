"""crewAI #5802 in CrewAI's own process (no model server: a scripted ``BaseLLM`` plays the
model, as CrewAI's docs allow a custom LLM): one task whose agent charges once, and whose
guardrail refuses the first output, so CrewAI runs the task again and the tool with it. Run
by tests/integration/test_ways_in.py in a venv of its own (scripts/setup.sh: CrewAI pins
mcp<2, the gateway needs 2.x).

    python crew_retry.py derived|model AMOUNT_CENTS

``derived``: runonce's CrewAI tools (keys from the kickoff, the task and the call's rank);
``model``: a tool that passes on a key the model makes up on each attempt. Prints one JSON
line per tool answer."""


import json
import os
import sys
from typing import Any, Tuple

os.environ.update(CREWAI_DISABLE_TELEMETRY="true", OTEL_SDK_DISABLED="true", CREWAI_TRACING_ENABLED="false")

from crewai.hooks import register_after_tool_call_hook  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from scripted import DONE, ScriptedLLM, charge, charged  # noqa: E402

from crewai import Agent, Crew, Task  # noqa: E402
from runonce.integrations.crewai import ToolArguments, crewai_tools  # noqa: E402
from runonce.sdk.client import ActionClient  # noqa: E402

MODE, AMOUNT = sys.argv[1], int(sys.argv[2])
ANSWERS: list[str] = []


class Scripted(ScriptedLLM):
    """Calls charge_payment until it has seen the tool's answer, then gives its final answer."""

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None, **_: Any) -> str:
        return DONE if charged(messages) else charge(AMOUNT)


class ModelKeyed(BaseTool):
    """What a tool does without runonce's place: the model's key, new on every attempt."""

    name: str = "charge_payment"
    description: str = "Charge a card"
    args_schema: Any = ToolArguments
    client: Any = None

    def _run(self, **arguments: Any) -> str:
        outcome = self.client.submit("charge_payment", arguments["params"],
                                     idempotency_key=arguments["idempotency_key"]).result(60)
        return f"charge_payment {outcome.status}"


attempts = {"n": 0}


def refuse_the_first(output: Any) -> Tuple[bool, Any]:  # CrewAI checks this very annotation
    attempts["n"] += 1
    return (attempts["n"] > 1, output.raw if attempts["n"] > 1 else "state the charge's reference")


with ActionClient(os.environ["RUNONCE_BOOTSTRAP"], agent_id="crewai-agent") as client:
    tools = (crewai_tools(client, timeout_s=60, only={"charge_payment"}) if MODE == "derived"
             else [ModelKeyed(client=client)])
    register_after_tool_call_hook(lambda ctx: ANSWERS.append(str(ctx.tool_result)) if ctx.tool_result else None)
    agent = Agent(role="billing", goal="charge the order", backstory="a billing clerk",
                  llm=Scripted(model="scripted"), tools=tools)
    task = Task(description="Charge the order", expected_output="that it is charged", agent=agent,
                guardrail=refuse_the_first, guardrail_max_retries=2)
    Crew(agents=[agent], tasks=[task]).kickoff()
for answer in ANSWERS:
    print(json.dumps({"answer": answer, "attempts": attempts["n"]}))
