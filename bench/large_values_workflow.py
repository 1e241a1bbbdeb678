"""The workflow ``bench/large_values.py`` drives: each ``turn`` update reads the session's
scoped-state document through the turn API, changes one KiB of it and writes it back with
``turn.commit()`` (no model call: what is measured is the document's way in and out)."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

from statecore.core._models import Message, SessionRef
from statecore.workflow import TurnSession

WORKFLOW_TYPE = "BenchLargeDocument"
#: The part of the document each turn rewrites.
EDIT_BYTES = 1024


class Document(BaseModel):
    text: str = ""
    turns: int = 0


class TurnAsk(BaseModel):
    turn_id: str


@workflow.defn(name=WORKFLOW_TYPE)
class LargeDocument:
    @workflow.init
    def __init__(self, ref: SessionRef) -> None:
        self._session = TurnSession(ref, state_type=Document)

    @workflow.run
    async def run(self, ref: SessionRef) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def turn(self, ask: TurnAsk) -> int:
        async with self._session.turn(ask.turn_id) as turn:
            turn.append(Message(role="user", content="edit the document"))
            document = await turn.state.get()
            text = document.text
            at = (document.turns * EDIT_BYTES) % max(len(text) - EDIT_BYTES, 1)
            edit = f"turn {document.turns + 1} ".ljust(EDIT_BYTES, "#")[: len(text) - at]
            text = text[:at] + edit + text[at + len(edit) :]
            turn.state.update(Document(text=text, turns=document.turns + 1))
            return (await turn.commit()).turn
