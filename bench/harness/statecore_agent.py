"""Side (b)'s agent: the benchmark's weather agent as an OpenAI Agents SDK ``agents.Agent``,
to be registered with statecore's plugin and run as statecore turns.

The same instructions, model server and tool as side (a); the tool is a plain function tool,
because on statecore the whole run (model calls and tools) happens inside the turn's activity.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from bench.harness.fake_openai_server import weather
from bench.harness.side_by_side_measure import INSTRUCTIONS, MODEL


@function_tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return weather(city)


def weather_agent(model_url: str) -> Agent[Any]:
    # The SDK exports traces to OpenAI unless told not to; nothing may leave this machine.
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=model_url, api_key="fake-key")
    return Agent(
        name="Weather",
        instructions=INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        tools=[get_weather],
    )
