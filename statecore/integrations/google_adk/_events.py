"""ADK events as statecore messages, and back.

Every ADK event is one message of the session's log. The event itself, exactly as ADK dumps it
(``model_dump(mode="json", exclude_none=True)``, the form ADK's own ``DatabaseSessionService``
stores), travels in the message's metadata under ``EVENT_KEY`` and is what ``get_session``
returns. The message's role and text are a readable view of it for statecore's side (token
counts, the context window, compaction, ``describe``, export): the user's events are ``user``
messages, every other author's are ``assistant`` messages, and an event without text is
described in one line (a function call, a function result, a state change).
"""

from __future__ import annotations

import json
from typing import Any

from google.adk.events.event import Event
from google.genai import types
from pydantic import JsonValue

from statecore.core._errors import ContentTooLargeError, CorruptCheckpointError
from statecore.core._limits import MAX_MESSAGE_BYTES
from statecore.core._models import Message, StoredMessage

#: The metadata key holding the ADK event a message stands for.
EVENT_KEY = "adk_event"
#: The longest function argument or result text quoted in a message's readable view.
_QUOTE_CHARS = 200


def event_json(event: Event) -> dict[str, JsonValue]:
    """The event as ADK's database service stores it."""
    data: dict[str, JsonValue] = event.model_dump(mode="json", exclude_none=True)
    return data


def event_to_message(event: Event) -> Message:
    """The log message of ``event``; ``ContentTooLargeError`` for an event over the message
    limit (checked here, before anything is written)."""
    data = event_json(event)
    size = len(json.dumps(data, ensure_ascii=False).encode())
    if size > MAX_MESSAGE_BYTES:
        raise ContentTooLargeError(
            f"the ADK event {event.id!r} is {size} bytes as JSON, over the "
            f"{MAX_MESSAGE_BYTES}-byte limit of one message; store large data as an "
            "artifact or in KV and keep its key in the event",
            event_id=event.id,
            size=size,
        )
    role = "user" if event.author == "user" else "assistant"
    return Message(
        role=role,
        content=readable_text(event),
        name=_name(event.author),
        metadata={EVENT_KEY: data},
    )


def message_to_event(message: StoredMessage) -> Event:
    """The ADK event a stored message stands for. A message written by statecore itself (a
    turn of its own model, an import) becomes a plain text event of its role."""
    data = message.metadata.get(EVENT_KEY)
    if data is None:
        author = "user" if message.role == "user" else (message.name or "model")
        return Event(
            id=f"statecore-{message.seq}",
            invocation_id=message.turn_id,
            author=author,
            content=types.Content(
                role="user" if message.role == "user" else "model",
                parts=[types.Part(text=message.content)],
            ),
            timestamp=message.created_at.timestamp(),
        )
    try:
        return Event.model_validate(data)
    except Exception as exc:
        raise CorruptCheckpointError(
            f"message {message.seq} holds an ADK event that ADK cannot read back: {exc}",
            seq=message.seq,
        ) from exc


def readable_text(event: Event) -> str:
    """One line per part of the event's content; never empty."""
    lines: list[str] = []
    parts = event.content.parts if event.content and event.content.parts else []
    for part in parts:
        if part.text and not part.thought:
            lines.append(part.text)
        elif part.function_call is not None:
            call = part.function_call
            lines.append(f"[call {call.name}({_quote(call.args)})]")
        elif part.function_response is not None:
            answer = part.function_response
            lines.append(f"[result of {answer.name}: {_quote(answer.response)}]")
    text = "\n".join(line for line in lines if line.strip())
    if text.strip():
        return text
    delta = event.actions.state_delta if event.actions else {}
    if delta:
        return f"[{event.author} changed state: {', '.join(sorted(delta))}]"
    return f"[event by {event.author}]"


def _quote(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 3] + "..."


def _name(author: str) -> str | None:
    # A message name is at most 256 characters; an author is an agent name (or "user").
    return author[:256] if author and author != "user" else None
