"""Stored conversation logs built in memory, for the pure context and compaction functions.

Tokens are counted with the real offline counter, exactly as a store counts them on write,
so a context built from these logs can be checked against ``counter.count_messages``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from statecore.core._models import Message, SessionInfo, SessionRef, StoredMessage, ToolCall
from statecore.core._tokens import TokenCounter

REF = SessionRef(agent_id="agent", session_id="s1")
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str) -> Message:
    return Message(role="assistant", content=text)


def call(*ids: str, name: str = "lookup") -> Message:
    """An assistant message asking for one tool call per id."""
    return Message(
        role="assistant",
        tool_calls=[ToolCall(id=i, name=name, arguments='{"q": "x"}') for i in ids],
    )


def result(call_id: str, text: str = "ok") -> Message:
    return Message(role="tool", tool_call_id=call_id, content=text)


class LogBuilder:
    """Appends messages with consecutive seqs and counted tokens, like a store does."""

    def __init__(self, counter: TokenCounter, *, first_seq: int = 1) -> None:
        self.counter = counter
        self.messages: list[StoredMessage] = []
        self._next_seq = first_seq
        self._cumulative = 0

    def add(self, *messages: Message, turn_id: str = "turn") -> list[StoredMessage]:
        out = []
        for index, msg in enumerate(messages):
            tokens = self.counter.count_message(msg)
            self._cumulative += tokens
            stored = StoredMessage(
                **msg.model_dump(),
                seq=self._next_seq,
                turn_id=turn_id,
                index=index,
                tokens=tokens,
                cumulative_tokens=self._cumulative,
                created_at=T0,
            )
            self._next_seq += 1
            out.append(stored)
        self.messages.extend(out)
        return out

    def session(self, window_start_seq: int = 1) -> SessionInfo:
        return SessionInfo(
            ref=REF,
            last_seq=self._next_seq - 1,
            message_count=len(self.messages),
            token_total=self._cumulative,
            window_start_seq=window_start_seq,
            created_at=T0,
            last_accessed=T0,
        )

    def window(self, window_start_seq: int = 1) -> list[StoredMessage]:
        return [m for m in self.messages if m.seq >= window_start_seq]
