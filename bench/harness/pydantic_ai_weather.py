"""The side-by-side benchmark's Pydantic AI agent, the same on both sides.

Imports only Pydantic AI and the stdlib parts of ``bench/``, so the official integration's
separate environment runs it too. The model is Pydantic AI's own ``FunctionModel``, answering
as ``bench/harness/fake_openai_server.py`` does for the OpenAI Agents benchmark: each turn calls
``get_weather`` once, then answers from what the tool said, so both sides make the same two
model calls and one tool call per turn.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bench.harness.fake_openai_server import answer, city_in, weather

INSTRUCTIONS = "You are a weather assistant. Use get_weather for every city asked about."


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The deterministic model: a tool return is answered; a question asks the tool."""
    parts = messages[-1].parts
    for part in parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(answer(str(part.content)))])
    prompts = [p.content for p in parts if isinstance(p, UserPromptPart)]
    city = city_in(str(prompts[-1])) if prompts else "Paris"
    return ModelResponse(parts=[ToolCallPart("get_weather", {"city": city})])


def weather_agent(*, durable: bool = False) -> Agent[None, str]:
    """The agent; ``durable`` adds Pydantic AI's ``TemporalDurability`` capability (the
    official side), with its defaults, as its documentation shows."""
    capabilities: list[Any] = []
    if durable:
        from pydantic_ai.durable_exec.temporal import TemporalDurability

        capabilities.append(TemporalDurability())
    agent: Agent[None, str] = Agent(
        FunctionModel(respond, model_name="fake-model"),
        name="weather",
        instructions=INSTRUCTIONS,
        capabilities=capabilities,
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return weather(city)

    return agent
