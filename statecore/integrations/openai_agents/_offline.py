"""A deterministic model for SDK agents: run the examples and tests offline.

``OfflineAgentModel`` is an ``agents.models.interface.Model`` that answers every run with
``You said: "<the newest user message>"`` (as statecore's ``OfflineModel`` does for plain
sessions), calls no tools and reaches no network. Give it to an agent
(``Agent(..., model=OfflineAgentModel())``) to try durable turns without an API key; swap in
a real model (or leave ``model`` unset for the SDK's default) when you have one.

It streams too (``Runner.run_streamed``): the same reply, word by word, as Responses API text
deltas and then the completed response; ``OfflineAgentModel(token_delay=0.05)`` paces the
words for demos and tests of streaming (docs/streaming.md).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

from agents import ModelSettings, Tool
from agents.items import ModelResponse
from agents.models.interface import Model, ModelTracing
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

_WORD = re.compile(r"\s*\S+\s*|\s+")


class OfflineAgentModel(Model):
    """Echoes the newest user message; deterministic, offline, no tool calls."""

    def __init__(self, *, token_delay: float = 0.0) -> None:
        if not isinstance(token_delay, int | float) or not 0 <= token_delay <= 60:
            raise ValueError(f"token_delay is {token_delay!r}; use 0 to 60 seconds")
        self.token_delay = float(token_delay)

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

    async def stream_response(
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
    ) -> AsyncIterator[Any]:
        """``get_response``'s reply as a stream: a text delta per word, then the response."""
        whole = await self.get_response(
            system_instructions, input, model_settings, tools, output_schema, handoffs, tracing
        )
        message = whole.output[0]
        assert isinstance(message, ResponseOutputMessage)
        part = message.content[0]
        assert isinstance(part, ResponseOutputText)
        sequence = 0
        for word in _WORD.findall(part.text):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id=message.id,
                output_index=0,
                content_index=0,
                delta=word,
                logprobs=[],
                sequence_number=sequence,
            )
            sequence += 1
        usage = whole.usage
        yield ResponseCompletedEvent(
            type="response.completed",
            sequence_number=sequence,
            response=Response(
                id="offline",
                created_at=0,
                model="offline",
                object="response",
                output=[message],
                parallel_tool_calls=False,
                tool_choice="auto",
                tools=[],
                usage=ResponseUsage(
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    total_tokens=usage.input_tokens + usage.output_tokens,
                    input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                    output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
                ),
            ),
        )


def _is_user(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user"


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
