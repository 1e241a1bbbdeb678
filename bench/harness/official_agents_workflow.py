"""The benchmark's agent on Temporal's official OpenAI Agents integration (side a).

Runs only in the benchmark's separate environment (``.cache/venv-official``, with
``temporalio-openai-agents`` and its pinned ``openai-agents``), never in statecore's.

A chat session the way the integration's multi-turn samples hold one: a long-running workflow
takes each user message in an update, runs ``Runner.run`` on the conversation so far plus the
new message, and keeps ``result.to_input_list()`` in the workflow for the next turn. The
integration runs every model call as an activity whose input is that whole conversation; the
tool runs as an activity (``activity_as_tool``), as the integration advises for I/O.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner
    from temporalio.contrib.openai_agents.workflow import activity_as_tool

    from bench.harness.fake_openai_server import weather
    from bench.harness.side_by_side_measure import INSTRUCTIONS, MODEL

WORKFLOW_TYPE = "OfficialAgentChat"


@activity.defn
async def get_weather(city: str) -> str:
    """Current weather in a city."""
    return weather(city)


@workflow.defn(name=WORKFLOW_TYPE)
class OfficialAgentChat:
    def __init__(self) -> None:
        self._items: list[Any] = []
        self._closed = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._closed)
        return len(self._items)

    @workflow.update
    async def send_message(self, text: str) -> str:
        agent: Agent[None] = Agent(
            name="Weather",
            instructions=INSTRUCTIONS,
            model=MODEL,
            tools=[activity_as_tool(get_weather, start_to_close_timeout=timedelta(seconds=30))],
        )
        result = await Runner.run(agent, input=[*self._items, {"role": "user", "content": text}])
        self._items = result.to_input_list()
        return str(result.final_output)

    @workflow.signal
    def close(self) -> None:
        self._closed = True
