"""A framework's agent as a statecore turn: the contract an integration implements.

A registered runner takes the place of the model call in a turn's activity. It reads what it
needs from the store (the committed log, through whatever view its framework expects), runs its
agent for the turn's new messages, and hands back everything the turn adds to the log, instead
of writing it: the activity commits those messages together with the turn record in one
transaction, so a retried activity never stores a run twice, and a turn id that already
committed answers from its record without running the agent again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import Field

from statecore.core._models import Message, SessionRef, StatecoreModel, TokenUsage
from statecore.core._profile import SessionProfile
from statecore.core._tokens import TokenCounter
from statecore.store._base import StateStore, StoreTransaction


@dataclass(frozen=True)
class AgentTurnRequest:
    """One turn to run: the session, the turn's new (not yet stored) messages, and what the
    runner may read the committed log through."""

    store: StateStore
    ref: SessionRef
    turn_id: str
    new_messages: Sequence[Message]
    profile: SessionProfile
    counter: TokenCounter
    #: Where a runner that can stream hands each piece of the reply's text as the framework
    #: produces it (docs/streaming.md); None when nobody reads the turn's stream. A runner
    #: that cannot stream ignores it: readers then get the reply from the commit.
    on_text: Callable[[str], None] | None = None


class AgentTurnOutcome(StatecoreModel):
    """What a run adds to the log, in order (the new messages as the framework recorded
    them, then everything it produced), and the reply the caller of the turn sees."""

    messages: list[Message]
    reply: Message
    usage: TokenUsage = Field(default_factory=TokenUsage)
    #: Tokens of the context the run started from, as statecore counts them.
    context_tokens: int = 0
    #: What the framework's own store writes besides the log (a session header, state shared
    #: beyond the session), run inside the turn's commit transaction after the turn record,
    #: so it commits with the turn or not at all; never run for a turn that had committed.
    store_writes: Callable[[StoreTransaction], Awaitable[None]] | None = Field(
        default=None, exclude=True
    )


@runtime_checkable
class AgentTurnRunner(Protocol):
    """Runs one turn of a framework's agent; writes nothing to the store itself."""

    async def run_turn(self, request: AgentTurnRequest) -> AgentTurnOutcome: ...
