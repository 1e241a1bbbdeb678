"""What a reader of a streamed turn receives, and where it stands (docs/streaming.md).

Events, in order: ``text`` deltas and ``tool_call``s of the attempt being read, a ``restarted``
whenever the attempt the reader was following was replaced by a retry (the deltas after it
start the new attempt's reply from its beginning), and one ``final`` carrying the turn's
``TurnResult``. The ``text`` deltas after the last ``restarted`` (or from the start), joined,
equal ``final.result.reply.content`` exactly.

A reader's position is a ``StreamPosition``: the attempt, the characters of its text and the
tool calls already delivered, and a CRC-32 of that text, so a reader that reconnects after
the turn committed can tell whether what it has is the beginning of the committed reply or the
output of an attempt that was replaced while it was away. ``str(position)`` is its compact
form (an SSE event id); ``StreamPosition.parse`` reads it back.
"""

from __future__ import annotations

import zlib
from typing import Annotated, Literal

from pydantic import Field

from statecore.contract._session import TurnResult
from statecore.core._errors import InvalidInputError
from statecore.core._models import Message, StatecoreModel, ToolCall


class StreamPosition(StatecoreModel):
    attempt: int = Field(default=0, ge=0)
    offset: int = Field(default=0, ge=0)
    calls: int = Field(default=0, ge=0)
    crc: int = Field(default=0, ge=0, le=0xFFFFFFFF)

    def __str__(self) -> str:
        return f"{self.attempt}.{self.offset}.{self.calls}.{self.crc:08x}"

    @classmethod
    def parse(cls, text: str) -> StreamPosition:
        parts = text.strip().split(".")
        try:
            attempt, offset, calls = (int(p) for p in parts[:3])
            crc = int(parts[3], 16)
            if len(parts) != 4:
                raise ValueError(text)
            return cls(attempt=attempt, offset=offset, calls=calls, crc=crc)
        except (ValueError, IndexError) as exc:
            raise InvalidInputError(
                f"stream position {text[:80]!r} is not attempt.offset.calls.crc (as "
                "received with a stream event)",
                field="position",
            ) from exc


class TextEvent(StatecoreModel):
    """The next piece of the reply: ``text`` starts at character ``offset`` of the attempt's
    reply."""

    type: Literal["text"] = "text"
    turn_id: str
    attempt: int
    offset: int
    text: str
    position: StreamPosition


class ToolCallEvent(StatecoreModel):
    """A tool call the reply makes (the ``index``-th of the attempt)."""

    type: Literal["tool_call"] = "tool_call"
    turn_id: str
    attempt: int
    index: int
    call: ToolCall
    position: StreamPosition


class RestartedEvent(StatecoreModel):
    """The attempt being read was replaced (a worker died, the model call failed and was
    retried): forget its text; what follows is the reply from its start. ``attempt`` is the
    new attempt's number, when known (a reader that learns it from the commit does not)."""

    type: Literal["restarted"] = "restarted"
    turn_id: str
    attempt: int | None
    position: StreamPosition


class FinalEvent(StatecoreModel):
    """The turn committed; ``result`` is what ``send`` returns."""

    type: Literal["final"] = "final"
    turn_id: str
    result: TurnResult


TurnEvent = Annotated[
    TextEvent | ToolCallEvent | RestartedEvent | FinalEvent, Field(discriminator="type")
]


class StreamCursor:
    """Turns what a reader reads (stream rows, then the committed reply) into events, from
    ``position`` on. Pure: no I/O, so every path is testable on its own."""

    def __init__(self, turn_id: str, position: StreamPosition | None = None) -> None:
        self.turn_id = turn_id
        self.position = position or StreamPosition()

    def _moved(self, **changes: int) -> StreamPosition:
        self.position = self.position.model_copy(update=changes)
        return self.position

    def on_row(self, attempt: int, text: str, tool_calls: tuple[ToolCall, ...]) -> list[object]:
        events: list[object] = []
        pos = self.position
        if attempt < pos.attempt:
            return events  # an older attempt's row, read before the newer one replaced it
        if attempt != pos.attempt:
            restarted = pos.attempt != 0 or pos.offset or pos.calls
            pos = self._moved(attempt=attempt, offset=0, calls=0, crc=0)
            if restarted:
                events.append(RestartedEvent(turn_id=self.turn_id, attempt=attempt, position=pos))
        if len(text) > pos.offset:
            delta = text[pos.offset :]
            start = pos.offset
            pos = self._moved(offset=len(text), crc=zlib.crc32(delta.encode(), pos.crc))
            events.append(
                TextEvent(
                    turn_id=self.turn_id, attempt=attempt, offset=start, text=delta, position=pos
                )
            )
        for index in range(pos.calls, len(tool_calls)):
            pos = self._moved(calls=index + 1)
            events.append(
                ToolCallEvent(
                    turn_id=self.turn_id,
                    attempt=attempt,
                    index=index,
                    call=tool_calls[index],
                    position=pos,
                )
            )
        return events

    def on_commit(self, reply: Message, result: TurnResult) -> list[object]:
        """The rest of the committed reply and the final event (``on_committed_text``, then
        ``final``)."""
        return [*self.on_committed_text(reply), self.final(result)]

    def final(self, result: TurnResult) -> FinalEvent:
        return FinalEvent(turn_id=self.turn_id, result=result)

    def on_committed_text(self, reply: Message) -> list[object]:
        """The rest of the committed reply. When what the reader has is not the beginning of
        the committed reply (its attempt was replaced and the retry committed before the
        reader saw the retry's row), a restart first, then all of it."""
        events: list[object] = []
        pos = self.position
        text = reply.content
        head = text[: pos.offset]
        consistent = (
            len(text) >= pos.offset
            and len(head) == pos.offset
            and zlib.crc32(head.encode()) == pos.crc
            and len(reply.tool_calls) >= pos.calls
        )
        if not consistent:
            pos = self._moved(offset=0, calls=0, crc=0)
            events.append(RestartedEvent(turn_id=self.turn_id, attempt=None, position=pos))
        events.extend(self.on_row(pos.attempt, text, tuple(reply.tool_calls)))
        return events
