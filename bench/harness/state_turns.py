"""State-only turns on the turn API: what ``turn.commit()`` costs next to the local-activity
floor (``FloorSession.turn_local``, one no-op local activity).

``StateSession`` is ``FloorSession`` with statecore's turn API inside each Update, and no
model call. Its ``turn`` update buffers one KV put and one message and commits them with
``turn.commit()``: one local activity, one SQL transaction. ``turn_reads`` first reads a KV
key and the session's scoped-state document (one local activity each), then commits the
same. It is driven and moves to new runs exactly as ``FloorSession`` (bench/harness/measure.py's
``floor_scenario`` with ``workflow_type=STATE_WORKFLOW``).
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from bench.harness.floor import DRAINING, FloorInput, FloorReply, FloorTurn
from statecore.core._models import Message, SessionRef
from statecore.workflow import TurnSession

STATE_WORKFLOW = "BenchStateSession"
#: The agent id of every state-only session (the session id comes from the benchmark).
STATE_AGENT = "bench-state"


class Notes(BaseModel):
    """The scoped-state document ``turn_reads`` reads (never written: a read of a session
    with no document returns the default)."""

    topic: str = "benchmark"


@workflow.defn(name=STATE_WORKFLOW)
class StateSession:
    @workflow.init
    def __init__(self, input: FloorInput) -> None:
        self._input = input
        self._turns_this_run = 0
        self._draining = False
        self._session = TurnSession(
            SessionRef(agent_id=STATE_AGENT, session_id=input.session_id), state_type=Notes
        )
        self._session.turn_number = input.turns_before

    @workflow.run
    async def run(self, input: FloorInput) -> None:
        await workflow.wait_condition(self._should_continue)
        self._draining = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            FloorInput(
                session_id=input.session_id,
                max_turns_per_run=input.max_turns_per_run,
                turns_before=self._session.turn_number,
            )
        )

    def _should_continue(self) -> bool:
        return (
            self._turns_this_run >= self._input.max_turns_per_run
            or workflow.info().is_continue_as_new_suggested()
        )

    async def _commit(self, turn: FloorTurn, *, reads: bool) -> FloorReply:
        self._turns_this_run += 1
        number = self._session.turn_number + 1
        async with self._session.turn(turn.turn_id) as t:
            if reads:
                await t.kv.get("notes", "last")
                await t.state.get()
            t.kv.put("notes", "last", {"turn": number})
            t.append(Message(role="user", content=turn.content))
            done = await t.commit()
        return FloorReply(turn=done.turn, content="")

    @workflow.update(name="turn")
    async def turn(self, turn: FloorTurn) -> FloorReply:
        return await self._commit(turn, reads=False)

    @workflow.update(name="turn_reads")
    async def turn_reads(self, turn: FloorTurn) -> FloorReply:
        return await self._commit(turn, reads=True)

    @turn.validator
    def _validate(self, turn: FloorTurn) -> None:
        self._refuse_while_draining()

    @turn_reads.validator
    def _validate_reads(self, turn: FloorTurn) -> None:
        self._refuse_while_draining()

    def _refuse_while_draining(self) -> None:
        if self._draining or self._turns_this_run >= self._input.max_turns_per_run:
            raise ApplicationError("moving to a new run; retry", type=DRAINING)
