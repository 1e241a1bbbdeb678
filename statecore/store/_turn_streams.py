"""The storage contract of a running turn's stream: the reply as far as the model has written it.

One row per (session, turn id) while the turn's model call runs: the attempt that wrote it,
the reply's text so far (at most ``MAX_STREAM_TEXT_CHARS``) and the tool calls the model has
asked for so far. The model call's activity rewrites it as the model produces output
(``statecore.activities._stream_writer``) and removes it once the turn has committed;
readers (``statecore.operations._turn_stream``) follow it and finish from the committed turn.

The row is scratch space, outside the turn's transaction and outside the change feed: it
holds nothing the commit does not hold too, and losing it only costs a reader the deltas
until the commit. A write names its attempt and never replaces a newer attempt's row, so a
superseded attempt that is still running cannot overwrite its retry's output.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from statecore.core._errors import InvalidInputError
from statecore.core._identifiers import validate_turn_id
from statecore.core._limits import MAX_STREAM_TEXT_CHARS, MAX_STREAM_TOOL_CALLS
from statecore.core._models import SessionRef, ToolCall
from statecore.store._inputs import check_int, check_ref
from statecore.store._signals import WakeSignal, polling


@dataclass(frozen=True)
class TurnStreamSnapshot:
    """A stream row as read: ``attempt`` (1 for the first), the reply's text so far and the
    tool calls so far. ``full``: the text reached ``MAX_STREAM_TEXT_CHARS`` and grows no
    more; the rest of the reply comes with the commit."""

    attempt: int
    text: str
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    full: bool = False


def check_stream_write(
    ref: SessionRef, turn_id: str, attempt: int, text: str, tool_calls: Sequence[ToolCall]
) -> tuple[str, tuple[ToolCall, ...], bool]:
    """The contract's checks of a write, shared by every backend; returns the text and tool
    calls cut to the row's bounds, and whether the text was cut."""
    check_ref(ref)
    validate_turn_id(turn_id)
    check_int(attempt, "attempt", minimum=1)
    if not isinstance(text, str):
        raise InvalidInputError(f"text must be a string, got {type(text).__name__}")
    calls = tuple(tool_calls)
    if not all(isinstance(c, ToolCall) for c in calls):
        raise InvalidInputError("tool_calls must be ToolCall objects")
    full = len(text) >= MAX_STREAM_TEXT_CHARS
    return text[:MAX_STREAM_TEXT_CHARS], calls[:MAX_STREAM_TOOL_CALLS], full


class TurnStreamStore(abc.ABC):
    """Stream rows of running turns. Every method is one short transaction of its own."""

    @abc.abstractmethod
    async def write(
        self,
        ref: SessionRef,
        turn_id: str,
        attempt: int,
        text: str,
        tool_calls: Sequence[ToolCall] = (),
    ) -> bool:
        """Set the turn's row to ``attempt``'s output so far (text cut to
        ``MAX_STREAM_TEXT_CHARS``). Returns False and changes nothing when a newer attempt
        holds the row or the session does not exist."""

    @abc.abstractmethod
    async def read(self, ref: SessionRef, turn_id: str) -> TurnStreamSnapshot | None:
        """The turn's row, or None (not started streaming, or committed and removed)."""

    @abc.abstractmethod
    async def remove(self, ref: SessionRef, turn_id: str) -> bool:
        """Remove the turn's row (its turn committed); False when there was none."""

    @abc.abstractmethod
    async def count(self, ref: SessionRef) -> int:
        """How many stream rows the session has (tests and benchmarks: none once its turns
        committed)."""

    def changes(
        self, ref: SessionRef, turn_id: str, *, poll_interval: float
    ) -> AbstractAsyncContextManager[WakeSignal]:
        """What a reader waits on between reads: a timer of ``poll_interval`` seconds by
        default; a backend that can push (PostgreSQL, memory) wakes it when the row or the
        turn's commit changes."""
        return polling(poll_interval)
