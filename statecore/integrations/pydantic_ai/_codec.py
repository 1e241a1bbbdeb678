"""Pydantic AI messages <-> statecore messages.

A Pydantic AI ``ModelMessage`` is stored verbatim (as the JSON of Pydantic AI's own
``ModelMessagesTypeAdapter``) in the metadata of the statecore message that stands for it, so
it comes back exactly as it was written. The statecore message's role, text, tool calls and
tool-call id are derived from it, so that statecore still understands the log: tokens are
counted on real text, and a tool call and its return form one exchange the context window never
splits.

One Pydantic AI message is usually one statecore message. A request that answers several tool
calls at once becomes one ``tool`` message per answer, because statecore pairs a call with its
result by id: the first carries the Pydantic AI message, the others only say which entry they
belong to, and reading skips them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from statecore.core._errors import InvalidInputError, validation_message
from statecore.core._models import Message, ToolCall, check_message_size

#: The metadata key of the message that holds a Pydantic AI entry: its id, the entry before
#: it, and the Pydantic AI message as JSON.
ENTRY_KEY = "pydantic_ai_entry"
#: The metadata key of the extra ``tool`` messages of an entry (the entry's id).
PART_OF_KEY = "pydantic_ai_part_of"


def _is_call(part: Any) -> bool:
    """A response part calling a tool the run itself executes (the next request answers it;
    tool search and capability loading are such calls too)."""
    return isinstance(part, ToolCallPart)


def _is_answer(part: Any) -> bool:
    """A request part answering such a call (a legacy retry prompt names its tool)."""
    return isinstance(part, ToolReturnPart) or (
        isinstance(part, RetryPromptPart) and part.tool_name is not None
    )


def message_json(message: ModelMessage, what: str = "message") -> Any:
    """``message`` as the JSON value Pydantic AI's adapter writes, or a typed error."""
    try:
        text = ModelMessagesTypeAdapter.dump_json([message]).decode()
    except Exception as exc:  # a part holding something the adapter cannot serialise
        raise InvalidInputError(f"{what} cannot be serialised by Pydantic AI: {exc}") from exc
    check_message_size(text, what, measured_as=" as JSON")
    return json.loads(text)[0]


def parse_message(value: Any, what: str = "message") -> ModelMessage:
    """The Pydantic AI message stored as ``value``, or a typed error if it does not parse."""
    try:
        # Through JSON, as the adapter wrote it: bytes are base64 there, and only the JSON
        # validator decodes them.
        return ModelMessagesTypeAdapter.validate_json(json.dumps([value]))[0]
    except (ValidationError, TypeError, ValueError) as exc:
        if not isinstance(exc, ValidationError):
            raise InvalidInputError(f"{what} is not JSON: {exc}") from exc
        raise InvalidInputError(
            f"{what} is not a Pydantic AI message: {validation_message(exc)}"
        ) from exc


def parse_messages(value: Any) -> list[ModelMessage]:
    """A list of Pydantic AI messages from JSON (``str``/``bytes``) or plain Python, checked."""
    try:
        text = value if isinstance(value, str | bytes) else json.dumps(value)
        return ModelMessagesTypeAdapter.validate_json(text)
    except (TypeError, ValueError) as exc:
        if not isinstance(exc, ValidationError):
            raise InvalidInputError(f"messages are not JSON: {exc}") from exc
        raise InvalidInputError(
            f"not a list of Pydantic AI messages: {validation_message(exc)}"
        ) from exc


def entry_messages(entry_id: str, parent_id: str | None, message: ModelMessage) -> list[Message]:
    """The statecore messages that store one entry (see the module docstring)."""
    if not isinstance(message, ModelRequest | ModelResponse):
        raise InvalidInputError(
            f"a conversation holds ModelRequest and ModelResponse objects, not "
            f"{type(message).__name__}"
        )
    stored = {
        "id": entry_id,
        "parent_id": parent_id,
        "message": message_json(message, f"entry {entry_id}"),
    }
    try:
        if isinstance(message, ModelResponse):
            return [_response_message(message, stored)]
        return _request_messages(message, stored)
    except ValidationError as exc:
        raise InvalidInputError(f"entry {entry_id}: {validation_message(exc)}") from exc


def _response_message(message: ModelResponse, stored: dict[str, Any]) -> Message:
    calls = [
        ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_json_str())
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    text = "\n".join(_part_text(part) for part in message.parts if not _is_call(part))
    return Message(
        role="assistant",
        content=text if text.strip() or calls else _fallback(stored),
        tool_calls=calls,
        metadata={ENTRY_KEY: stored},
    )


def _request_messages(message: ModelRequest, stored: dict[str, Any]) -> list[Message]:
    answers: list[ToolReturnPart | RetryPromptPart] = [
        part
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart) and _is_answer(part)
    ]
    others = [_part_text(part) for part in message.parts if part not in answers]
    text = "\n".join(t for t in others if t)
    if not answers:
        only_system = all(isinstance(p, SystemPromptPart) for p in message.parts)
        return [
            Message(
                role="system" if only_system and message.parts else "user",
                content=text if text.strip() else _fallback(stored),
                metadata={ENTRY_KEY: stored},
            )
        ]
    out = []
    for n, part in enumerate(answers):
        content = _part_text(part)
        if n == 0 and text:
            content = f"{content}\n{text}" if content else text
        out.append(
            Message(
                role="tool",
                content=content,
                tool_call_id=part.tool_call_id,
                metadata={ENTRY_KEY: stored} if n == 0 else {PART_OF_KEY: stored["id"]},
            )
        )
    return out


def stored_entry(message: Message) -> dict[str, Any] | None:
    """The entry a statecore message holds (``id``, ``parent_id``, ``message``), if any."""
    stored = message.metadata.get(ENTRY_KEY)
    return stored if isinstance(stored, dict) else None


def entry_id_of(message: Message) -> str | None:
    """The id of the entry ``message`` holds or belongs to, if it was written here."""
    stored = stored_entry(message)
    if stored is not None:
        return str(stored["id"])
    part_of = message.metadata.get(PART_OF_KEY)
    return part_of if isinstance(part_of, str) else None


def to_model_messages(messages: Sequence[Message]) -> list[ModelMessage]:
    """What a statecore context (or log) says, as Pydantic AI messages: the stored message
    where this integration wrote one; otherwise (a statecore chat turn, the context's system
    prompt, summary and hints) the equivalent request or response."""
    out: list[ModelMessage] = []
    for message in messages:
        stored = stored_entry(message)
        if stored is not None:
            out.append(parse_message(stored["message"], f"entry {stored.get('id')}"))
        elif PART_OF_KEY in message.metadata:
            continue
        elif message.role == "assistant":
            out.append(ModelResponse(parts=[TextPart(content=message.content)]))
        elif message.role == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(content=message.content)]))
        else:
            out.append(ModelRequest(parts=[UserPromptPart(content=message.content)]))
    return out


def _part_text(part: Any) -> str:
    """The readable text of a part, which is what statecore counts its tokens on."""
    response = getattr(part, "model_response_str", None)
    if part.part_kind == "tool-return" and callable(response):
        return str(response())
    if part.part_kind == "retry-prompt" and callable(getattr(part, "model_response", None)):
        return str(part.model_response())
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [item if isinstance(item, str) else _describe(item) for item in content]
        return "\n".join(t for t in texts if t)
    if content is not None:
        return _describe(content)
    return ""


def _describe(item: Any) -> str:
    """A short stand-in for non-text content (an image, a file): its kind and size or URL,
    so a binary payload is not counted as text."""
    text = getattr(item, "content", None)
    if isinstance(text, str):
        return text
    kind = getattr(item, "kind", type(item).__name__)
    url = getattr(item, "url", None)
    data = getattr(item, "data", None)
    if isinstance(url, str):
        return f"[{kind} {url}]"
    if isinstance(data, bytes):
        return f"[{kind}, {len(data)} bytes]"
    return f"[{kind}]"


def _fallback(stored: dict[str, Any]) -> str:
    """Text for a message with none of its own (only thinking, only a file): its kind."""
    parts = stored["message"].get("parts", [])
    kinds = sorted({str(p.get("part_kind")) for p in parts if isinstance(p, dict)})
    return f"[{stored['message'].get('kind')}: {', '.join(kinds) or 'no parts'}]"
