"""The model contract: one request in, one assistant message out, optionally streamed.

A model is pluggable: the Temporal activity that calls it only knows ``ChatModel``. Requests and
responses are pydantic models built on ``statecore.core._models.Message``, so a reply can be stored
as it is, tool calls included.

The context assembler (``statecore.operations._context_window``) marks the system messages it
injects with ``metadata[CONTEXT_PART]``: ``"system_prompt"``, ``"summary"`` or ``"hints"`` (one
message, one ``- `` line per hint). Models that talk to a server ignore the mark; the offline
model reads it to say what context it was given, so tests can tell a wrong context from a
right one.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from pydantic import Field, JsonValue, field_validator, model_validator

from statecore.core._errors import InvalidInputError
from statecore.core._models import Message, StatecoreModel, TokenUsage, ToolCall

#: Metadata key naming which part of the assembled context a system message is.
CONTEXT_PART = "statecore.part"

# The OpenAI function-name alphabet; most OpenAI-compatible servers enforce the same.
_TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


_EMPTY_OBJECT_SCHEMA: dict[str, JsonValue] = {"type": "object", "properties": {}}


class ToolSpec(StatecoreModel):
    """A tool the model may call: its name, what it does, and a JSON schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, JsonValue] = Field(default_factory=lambda: _EMPTY_OBJECT_SCHEMA.copy())

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _TOOL_NAME_RE.match(v):
            raise InvalidInputError(
                f"tool name {v!r} may use only letters, digits, '_' and '-' (1 to 64 characters)"
            )
        return v


class ModelRequest(StatecoreModel):
    """One call to a chat model.

    ``model`` names the model the caller asked for; a client bound to one model (every client
    in this package) answers with its own and reports it in ``ModelResponse.model``.
    ``purpose="summarize"`` asks for a summary of the messages rather than a chat reply.
    ``prompt_tokens`` is what ``messages`` cost as the caller counted them (context assembly
    does, reply priming included); a model that reports its own usage ignores it.
    """

    messages: list[Message] = Field(min_length=1)
    model: str = "offline"
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    tools: list[ToolSpec] = Field(default_factory=list)
    purpose: Literal["chat", "summarize"] = "chat"
    prompt_tokens: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _unique_tools(self) -> ModelRequest:
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidInputError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        return self

    def tool(self, name: str) -> ToolSpec | None:
        """The offered tool called ``name``, or None."""
        return next((t for t in self.tools if t.name == name), None)


class ModelResponse(StatecoreModel):
    """The model's reply: an assistant message (text, tool calls or both) and its token cost."""

    message: Message
    usage: TokenUsage
    #: As the server reports it: "stop", "length", "tool_calls", "content_filter", ...
    finish_reason: str
    #: The model that answered, as the server names it.
    model: str

    @field_validator("message")
    @classmethod
    def _assistant(cls, v: Message) -> Message:
        if v.role != "assistant":
            raise InvalidInputError(f"a model reply must be an assistant message, not {v.role!r}")
        return v


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a ``ModelRequest``. ``name`` identifies it in logs and reports."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer the request. Raises ``ModelError`` (do not retry) or ``ModelUnavailableError``
        (retry later)."""
        ...


# --- streaming ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    """The next piece of the reply's text."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A tool call the reply makes, complete (arguments and all)."""

    call: ToolCall


#: What a streaming model yields: deltas, then exactly one ``ModelResponse`` last, whose
#: message's text is the deltas' texts joined and whose tool calls are the deltas' calls.
StreamItem = TextDelta | ToolCallDelta | ModelResponse


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A model that can also hand out its reply as it is generated."""

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield the reply's deltas as they come, then the whole ``ModelResponse``. Raises
        what ``complete`` raises."""
        ...


async def stream_reply(model: ChatModel, request: ModelRequest) -> AsyncIterator[StreamItem]:
    """``model.stream(request)`` when the model streams; otherwise its ``complete`` answer as
    one piece: the response alone (its text is then the one and only delta)."""
    if isinstance(model, StreamingChatModel) and getattr(model, "streams", True):
        async for item in model.stream(request):
            yield item
        return
    yield await model.complete(request)
