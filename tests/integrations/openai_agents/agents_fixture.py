"""Deterministic SDK agents for the tests: a rule-following ``agents.models.interface.Model``
(the LLM is the one part a test may fake) and the agents built on it.

The model answers from the input it is given, so what it says proves what it saw:

- ``weather in <city>`` -> calls the ``get_weather`` tool, then answers with its output;
- ``two cities <a> <b>`` -> calls ``get_weather`` twice in parallel, then answers with both;
- ``specialist`` -> hands off to the specialist agent, which answers "specialist here";
- ``explode`` -> calls the ``explode`` tool, which raises;
- ``unreachable`` -> raises the OpenAI client's connection error (the endpoint is down);
- ``what did I say`` -> answers with every earlier user message it sees, joined by " | "
  ("nothing yet" when it sees none);
- anything else -> ``echo: <text>``.

Each call appends one line to ``calls_file`` when given, so a test counts the model's calls
(also across a worker process it kills).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from agents import Agent, ModelSettings, Tool, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model, ModelTracing
from agents.usage import Usage
from openai import APIConnectionError
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

# Nothing reaches the network: the SDK would export traces to OpenAI whenever an API key is
# set in the environment.
set_tracing_disabled(True)


class RuleModel(Model):
    def __init__(self, *, calls_file: Path | None = None, delay: float = 0.0) -> None:
        self.calls_file = calls_file
        self.delay = delay
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        if self.calls_file is not None:
            with self.calls_file.open("a") as f:
                f.write(f"{system_instructions or ''}|{len(items)}\n")
        if self.delay:
            await asyncio.sleep(self.delay)
        output = self._decide(system_instructions or "", items, handoffs)
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=10 * len(items), output_tokens=5),
            response_id=None,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run agents without streaming")

    def _decide(
        self, instructions: str, items: list[dict[str, Any]], handoffs: list[Any]
    ) -> list[Any]:
        if "specialist" in instructions:
            return [_text("specialist here")]
        last = items[-1]
        if last.get("type") == "function_call_output":
            outputs = []
            for item in reversed(items):
                if item.get("type") != "function_call_output":
                    break
                outputs.insert(0, str(item.get("output")))
            return [_text("weather: " + "; ".join(outputs))]
        text = _user_text(last)
        if text.startswith("weather in "):
            return [_call("get_weather", {"city": text.removeprefix("weather in ")}, "c1")]
        if text.startswith("two cities "):
            a, b = text.removeprefix("two cities ").split()
            return [
                _call("get_weather", {"city": a}, "ca"),
                _call("get_weather", {"city": b}, "cb"),
            ]
        if text == "specialist":
            return [_call(handoffs[0].tool_name, {}, "h1")]
        if text == "unreachable":
            raise APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1"))
        if text == "explode":
            return [_call("explode", {}, "x1")]
        if text == "what did I say":
            said = [_user_text(i) for i in items[:-1] if i.get("role") == "user"]
            return [_text(" | ".join(said) or "nothing yet")]
        return [_text(f"echo: {text}")]


def _user_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _text(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])],
    )


def _call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc-{call_id}",
        call_id=call_id,
        type="function_call",
        name=name,
        arguments=json.dumps(arguments),
    )


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool(failure_error_function=None)
def explode() -> str:
    """A tool that fails."""
    raise RuntimeError("the tool exploded")


def build_agent(model: RuleModel) -> Agent[Any]:
    """A front-desk agent with two tools and a handoff to a specialist, all on ``model``."""
    specialist = Agent(name="specialist", instructions="You are the specialist.", model=model)
    return Agent(
        name="front-desk",
        instructions="You help with the weather.",
        model=model,
        tools=[get_weather, explode],
        handoffs=[specialist],
    )
