"""The benchmark's agent on Pydantic AI's own Temporal integration (side a).

Runs only in the benchmark's separate environment (``.cache/venv-official-pydantic-ai``), never
in statecore's. A chat session the way the integration's documentation holds a multi-turn
conversation: a long-running workflow takes each user message in an update, runs the durable
agent with the conversation so far as ``message_history``, and keeps ``result.all_messages()``
for the next turn. The integration runs every model call (and the tool) as an activity whose
input carries that history.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow

    from bench.harness.pydantic_ai_weather import weather_agent

WORKFLOW_TYPE = "OfficialPydanticAIChat"
AGENT = weather_agent(durable=True)


@workflow.defn(name=WORKFLOW_TYPE)
class OfficialPydanticAIChat(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [AGENT]

    def __init__(self) -> None:
        self._messages: list[Any] = []
        self._closed = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._closed)
        return len(self._messages)

    @workflow.update
    async def send_message(self, text: str) -> str:
        result = await AGENT.run(text, message_history=self._messages)
        self._messages = result.all_messages()
        return str(result.output)

    @workflow.signal
    def close(self) -> None:
        self._closed = True
