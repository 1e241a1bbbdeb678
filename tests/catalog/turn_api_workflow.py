"""CatalogAgent: a user's own workflow built on the turn API (``statecore.workflow``).

The bad-input catalog sends KV and scoped-state writes through it the way user code makes
them: buffered inside a turn and committed with it. The update takes one request model whose
size fields let a test ask for a large value without sending one (the payload stays small).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, JsonValue
from temporalio import workflow

from statecore.contract._activities import ACT_OPEN_SESSION, OpenSessionInput, SessionSnapshot
from statecore.core._models import Message, SessionRef
from statecore.workflow import TurnSession


class Notes(BaseModel):
    """The agent's scoped-state document."""

    text: str = ""
    turns: int = 0


class KVWrite(BaseModel):
    bucket: str
    key: str
    value: JsonValue = None
    #: Write a bytes value of this many bytes instead of ``value``.
    bytes_size: int | None = None
    #: Write a text value of this many characters instead of ``value``.
    text_size: int | None = None


class TurnRequest(BaseModel):
    turn_id: str
    content: str = "a note"
    kv: list[KVWrite] = Field(default_factory=list)
    #: Write the Notes document with ``text`` of this many characters.
    notes_size: int | None = None
    #: Hand this value to ``turn.state.update`` as it is (not a Notes document).
    state_value: JsonValue = None
    #: After reading the state, wait for the ``release`` signal before writing it.
    hold: bool = False
    #: Commit with ``turn.commit()`` (no model call) instead of ``turn.respond()``.
    commit_only: bool = False


@workflow.defn(name="CatalogAgent")
class CatalogAgent:
    @workflow.init
    def __init__(self, ref: SessionRef) -> None:
        self._session = TurnSession(ref, state_type=Notes)
        self._held = 0
        self._released = False
        self._opened = False

    @workflow.run
    async def run(self, ref: SessionRef) -> None:
        # The turn API reads the session's context from SQL: the session row must exist.
        await self._session.run_sql(ACT_OPEN_SESSION, OpenSessionInput(ref=ref), SessionSnapshot)
        self._opened = True
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def turn(self, request: TurnRequest) -> int:
        """Run one turn; returns its number."""
        await workflow.wait_condition(lambda: self._opened)
        async with self._session.turn(request.turn_id) as turn:
            turn.append(Message(role="user", content=request.content))
            for write in request.kv:
                turn.kv.put(write.bucket, write.key, _value(write))
            if request.notes_size is not None or request.hold:
                notes = await turn.state.get()
                if request.hold:
                    self._held += 1
                    await workflow.wait_condition(lambda: self._released)
                text = "x" * (request.notes_size or 0)
                turn.state.update(Notes(text=text, turns=notes.turns + 1))
            if request.state_value is not None:
                turn.state.update(request.state_value)
            if request.commit_only:
                return (await turn.commit()).turn
            out = await turn.respond()
        assert out.commit is not None
        return out.commit.turn

    @workflow.signal
    def release(self) -> None:
        self._released = True

    @workflow.query
    def held(self) -> int:
        """How many turns wait for ``release``."""
        return self._held


def _value(write: KVWrite) -> Any:
    if write.bytes_size is not None:
        return b"b" * write.bytes_size
    if write.text_size is not None:
        return "t" * write.text_size
    return write.value
