"""A deterministic ADK agent for tests: the real ADK agents, runner and tools, with a
``BaseLlm`` that answers by rules instead of calling a model (the only fake).

``RuleLlm`` answers the newest user text:

* ``weather in <city>`` calls ``get_weather``, then answers ``weather: sunny in <city>``;
* ``remember <fact>`` calls ``remember`` (writes ``user:fact``, ``notes`` and a ``temp:``
  value), then answers ``noted``;
* ``explode`` calls ``explode``, which raises;
* ``specialist`` transfers to the sub-agent ``specialist``, which answers ``specialist here``;
* ``what did I say`` answers the previous user text it was shown (``nothing yet``);
* anything else is echoed: ``echo: <text>``.

Every call is recorded in ``calls`` (and, with ``calls_file``, one line per call in that file,
for tests whose worker runs in another process).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field


class RuleLlm(BaseLlm):
    model: str = "rule-llm"
    #: ``specialist``: always answers "specialist here".
    persona: str = "desk"
    calls: list[int] = Field(default_factory=list)
    calls_file: str | None = None
    #: Seconds each call takes (a worker can be killed during one).
    delay: float = 0.0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.calls.append(len(llm_request.contents))
        if self.calls_file:
            with Path(self.calls_file).open("a") as f:
                f.write(f"{self.persona}\n")
        if self.delay:
            await asyncio.sleep(self.delay)
        yield LlmResponse(
            content=self._answer(llm_request.contents),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=10 * len(llm_request.contents), candidates_token_count=3
            ),
        )

    def _answer(self, contents: list[types.Content]) -> types.Content:
        if self.persona == "specialist":
            return _text("specialist here")
        last = contents[-1] if contents else None
        answered = (
            [p.function_response for p in (last.parts or []) if p.function_response] if last else []
        )
        if answered:
            response: dict[str, Any] = answered[0].response or {}
            if answered[0].name == "get_weather":
                return _text(f"weather: {response.get('report')}")
            return _text("noted")
        said = _user_texts(contents)
        text = said[-1] if said else ""
        if text.startswith("weather in "):
            return _call("get_weather", {"city": text.removeprefix("weather in ")})
        if text.startswith("remember "):
            return _call("remember", {"fact": text.removeprefix("remember ")})
        if text == "explode":
            return _call("explode", {})
        if text == "specialist":
            return _call("transfer_to_agent", {"agent_name": "specialist"})
        if text == "what did I say":
            return _text(said[-2] if len(said) > 1 else "nothing yet")
        return _text(f"echo: {text}")


def _text(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


def _call(name: str, args: dict[str, Any]) -> types.Content:
    return types.Content(
        role="model", parts=[types.Part(function_call=types.FunctionCall(name=name, args=args))]
    )


def _user_texts(contents: list[types.Content]) -> list[str]:
    return [
        p.text
        for c in contents
        if c.role == "user"
        for p in (c.parts or [])
        if p.text and not p.text.startswith("For context:")
    ]


def get_weather(city: str) -> dict[str, str]:
    """The weather in a city."""
    return {"report": f"sunny in {city}"}


def remember(fact: str, tool_context: ToolContext) -> dict[str, str]:
    """Remember a fact about the user."""
    tool_context.state["user:fact"] = fact
    tool_context.state["notes"] = [*tool_context.state.get("notes", []), fact]
    tool_context.state["temp:scratch"] = "never stored"
    return {"status": "ok"}


def explode() -> dict[str, str]:
    """A tool that fails."""
    raise RuntimeError("the tool exploded")


def build_agent(
    llm: RuleLlm | None = None, *, calls_file: str | None = None, delay: float = 0.0
) -> LlmAgent:
    desk = llm or RuleLlm(calls_file=calls_file, delay=delay)
    specialist = LlmAgent(
        name="specialist",
        model=RuleLlm(persona="specialist", calls_file=calls_file),
        instruction="You are the specialist.",
    )
    return LlmAgent(
        name="desk",
        model=desk,
        instruction="You are the front desk.",
        tools=[get_weather, remember, explode],
        sub_agents=[specialist],
    )
