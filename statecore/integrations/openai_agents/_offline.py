"""A deterministic model for SDK agents: run the examples and tests offline.

``OfflineAgentModel`` is an ``agents.models.interface.Model`` that answers every run with
``You said: "<the newest user message>"`` (as statecore's ``OfflineModel`` does for plain
sessions), calls no tools and reaches no network. Give it to an agent
(``Agent(..., model=OfflineAgentModel())``) to try durable turns without an API key; swap in
a real model (or leave ``model`` unset for the SDK's default) when you have one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents import ModelSettings, Tool
from agents.items import ModelResponse
from agents.models.interface import Model, ModelTracing
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText


class OfflineAgentModel(Model):
    """Echoes the newest user message; deterministic, offline, no tool calls."""

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
        said = next((_text_of(i) for i in reversed(items) if _is_user(i)), "")
        message = ResponseOutputMessage(
            id="offline",
            type="message",
            role="assistant",
            status="completed",
            content=[
                ResponseOutputText(
                    text=f'You said: "{said}"', type="output_text", annotations=[], logprobs=[]
                )
            ],
        )
        return ModelResponse(
            output=[message],
            usage=Usage(requests=1, input_tokens=len(items), output_tokens=1),
            response_id=None,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("OfflineAgentModel does not stream; run agents with Runner.run")


def _is_user(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user"


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
