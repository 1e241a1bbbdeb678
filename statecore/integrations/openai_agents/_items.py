"""Responses-API items (what the OpenAI Agents SDK keeps in a session) <-> statecore messages.

Every item becomes exactly one message, so the log keeps the SDK's order and a ``pop_item``
takes back exactly one item. The item itself is stored verbatim in the message's metadata and
comes back unchanged; the message's role, text, tool calls and tool-call ids are derived from it
so that statecore still understands the log: tokens are counted on real text, and a function
call and its output form one exchange that the context window never splits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from statecore.core._errors import InvalidInputError, validation_message
from statecore.core._models import Message, ToolCall, check_message_size, reject_nul

#: The metadata key that holds the verbatim item.
ITEM_KEY = "openai_agents_item"
#: Input-message roles statecore has no role for, and the role they are counted as.
_ROLE_ALIASES = {"developer": "system"}
_ROLES = {"system", "user", "assistant"}


def checked_item(item: Any, position: int = 0) -> dict[str, Any]:
    """``item`` as plain JSON (a dict), or a typed error saying what is wrong with it."""
    if not isinstance(item, Mapping):
        raise InvalidInputError(
            f"item {position} is a {type(item).__name__}; session items are JSON objects "
            "(Responses-API input items)"
        )
    try:
        text = json.dumps(item, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"item {position} is not JSON: {exc}") from exc
    check_message_size(text, f"item {position}", measured_as=" as JSON")
    plain: dict[str, Any] = json.loads(text)
    reject_nul(plain, f"item {position}")
    return plain


def item_to_message(item: Any, position: int = 0) -> Message:
    """The statecore message that stores ``item`` (checked first)."""
    plain = checked_item(item, position)
    kind = plain.get("type")
    role = "assistant"
    text = ""
    tool_calls: list[ToolCall] = []
    tool_call_id: str | None = None
    if kind == "function_call":
        try:
            tool_calls = [
                ToolCall(
                    id=str(plain.get("call_id") or plain.get("id") or f"call-{position}"),
                    name=str(plain.get("name") or "function"),
                    arguments=_as_text(plain.get("arguments", "{}")),
                )
            ]
        except ValidationError as exc:
            raise InvalidInputError(f"item {position}: {validation_message(exc)}") from exc
    elif kind == "function_call_output":
        role, tool_call_id = "tool", str(plain.get("call_id") or "")
        output = plain.get("output", "")
        # A list of content parts (text, images) counts as its text; anything else as JSON.
        text = (_text_of(output) if isinstance(output, list) else "") or _as_text(output)
    elif (kind is None or kind == "message") and isinstance(plain.get("role"), str):
        role = _ROLE_ALIASES.get(plain["role"], plain["role"])
        if role not in _ROLES:
            role = "user"
        text = _text_of(plain.get("content"))
    else:
        # Reasoning, hosted tool calls, compaction markers...: what reaches the model is the
        # item itself, so its readable text (or its JSON) is what the tokens are counted on.
        text = _text_of(plain.get("summary")) or _text_of(plain.get("content"))
    if role == "tool" and not tool_call_id:
        raise InvalidInputError(f"item {position} is a function_call_output without a call_id")
    if not text.strip() and not tool_calls and role != "tool":
        text = json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
    try:
        return Message(
            role=role,  # one of _ROLES or "tool", checked above
            content=text,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            metadata={ITEM_KEY: plain},
        )
    except ValidationError as exc:
        raise InvalidInputError(f"item {position}: {validation_message(exc)}") from exc


def items_to_messages(items: Sequence[Any]) -> list[Message]:
    """Every item as a message; the first bad item raises before anything is returned."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise InvalidInputError("items must be a list of Responses-API items (JSON objects)")
    return [item_to_message(item, n) for n, item in enumerate(items)]


def message_to_items(message: Message) -> list[dict[str, Any]]:
    """The items a stored message stands for: the verbatim item when this integration wrote
    it; otherwise the equivalent Responses-API items (a log written by a statecore chat turn
    or the context's system parts: prompt, summary, hints)."""
    stored = message.metadata.get(ITEM_KEY)
    if isinstance(stored, dict):
        return [stored]
    if message.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": message.content,
            }
        ]
    out: list[dict[str, Any]] = []
    if message.content.strip():
        out.append({"role": message.role, "content": message.content})
    for call in message.tool_calls:
        out.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return out


def messages_to_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [item for message in messages for item in message_to_items(message)]


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _text_of(content: Any) -> str:
    """The readable text of a message's content: a string, or the text of its parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    parts.append(part["refusal"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""
