"""Pydantic AI agents for the turn tests, on Pydantic AI's own ``FunctionModel`` and
``TestModel`` (the only fakes: the LLM). The agent, its tools, dependencies and output types
are the real library's."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ModelHTTPError, ModelUnavailableError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel


@dataclass
class Forecasts:
    """The weather tool's dependency: what it answers per city."""

    by_city: dict[str, str] = field(default_factory=dict)

    def for_city(self, city: str) -> str:
        return self.by_city.get(city, "sunny")


def _prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def desk_model(calls_file: Path | None = None, delay: float = 0.0) -> FunctionModel:
    """weather in X -> calls the weather tool, then answers with its return; explode -> calls
    a tool that raises; what did I say -> the first user prompt in the history it was sent.
    Each call first appends a line to ``calls_file`` (if given), then waits ``delay``."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if calls_file is not None:
            with calls_file.open("a") as f:
                f.write("call\n")
        if delay:
            await asyncio.sleep(delay)
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(f"weather: {returns[0].content}")])
        prompt = _prompts([last])[-1] if _prompts([last]) else ""
        if prompt.startswith("weather in "):
            city = prompt.removeprefix("weather in ")
            return ModelResponse(parts=[ToolCallPart("weather", {"city": city})])
        if prompt == "unreachable":
            raise ModelHTTPError.for_category(
                ModelUnavailableError, status_code=503, model_name="desk"
            )
        if prompt == "explode":
            return ModelResponse(parts=[ToolCallPart("explode", {})])
        if prompt == "what did I say":
            earlier = _prompts(messages[:-1])
            return ModelResponse(parts=[TextPart(earlier[0] if earlier else "nothing yet")])
        return ModelResponse(parts=[TextPart(f"echo: {prompt}")])

    return FunctionModel(respond)


def build_desk_agent(calls_file: Path | None = None, delay: float = 0.0) -> Agent[Forecasts, str]:
    agent = Agent(desk_model(calls_file, delay), deps_type=Forecasts, name="desk")

    @agent.tool
    def weather(ctx: RunContext[Forecasts], city: str) -> str:
        return f"{ctx.deps.for_city(city)} in {city}"

    @agent.tool_plain
    def explode() -> str:
        raise RuntimeError("the tool exploded")

    return agent


class Ticket(BaseModel):
    title: str
    priority: int


def build_form_agent() -> Agent[None, Ticket]:
    """An agent whose output is structured (TestModel fills the output type's schema)."""
    return Agent(TestModel(), output_type=Ticket, name="form")
