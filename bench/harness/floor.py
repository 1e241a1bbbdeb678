"""The bare floor: what one Temporal Update costs here with nothing of statecore in it.

``FloorSession`` is an AgentSession with the agent taken out. It is driven exactly the way
``AgentSessionClient.send`` drives a session (update-with-start, ``USE_EXISTING``, one update
id per turn, a retry while the run moves on), and it moves to a new run at the same points
(the server's continue-as-new suggestion or ``max_turns_per_run``), draining first. Its
``turn`` update runs one no-op regular activity (the shape of an AgentSession turn: one
model-plus-commit activity); ``turn_local`` runs one no-op local activity instead, and
``turn_upsert`` is ``turn`` plus the one search-attribute upsert (``StatecoreTurn``) that the
operator contract made every AgentSession turn carry until it became sparse (now a session's
first turn and every 10th): a history event and a visibility write on the server, with nothing
of statecore in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError

from statecore.contract._session import SA_TURN

FLOOR_WORKFLOW = "BenchFloorSession"
FLOOR_ACTIVITY = "bench.floor.noop"
#: The code AgentSession's validator uses for "moving to a new run; retry".
DRAINING = "SessionDraining"
_TURN_KEY = SearchAttributeKey.for_int(SA_TURN)


@dataclass
class FloorInput:
    session_id: str
    max_turns_per_run: int = 1000
    turns_before: int = 0


@dataclass
class FloorTurn:
    turn_id: str
    content: str
    role: str = "user"


@dataclass
class FloorReply:
    turn: int
    content: str


@activity.defn(name=FLOOR_ACTIVITY)
async def noop(turn: FloorTurn) -> str:
    """Does nothing: the cost measured is Temporal's alone."""
    return turn.content


@workflow.defn(name=FLOOR_WORKFLOW)
class FloorSession:
    @workflow.init
    def __init__(self, input: FloorInput) -> None:
        self._input = input
        self._turns_this_run = 0
        self._turn = input.turns_before
        self._draining = False

    @workflow.run
    async def run(self, input: FloorInput) -> None:
        await workflow.wait_condition(self._should_continue)
        self._draining = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(
            FloorInput(
                session_id=input.session_id,
                max_turns_per_run=input.max_turns_per_run,
                turns_before=self._turn,
            )
        )

    def _should_continue(self) -> bool:
        return (
            self._turns_this_run >= self._input.max_turns_per_run
            or workflow.info().is_continue_as_new_suggested()
        )

    @workflow.update(name="turn")
    async def turn(self, turn: FloorTurn) -> FloorReply:
        self._turns_this_run += 1
        content = await workflow.execute_activity(
            noop, turn, start_to_close_timeout=timedelta(minutes=2)
        )
        self._turn += 1
        return FloorReply(turn=self._turn, content=content)

    @workflow.update(name="turn_upsert")
    async def turn_upsert(self, turn: FloorTurn) -> FloorReply:
        reply = await self.turn(turn)
        workflow.upsert_search_attributes([_TURN_KEY.value_set(reply.turn)])
        return reply

    @workflow.update(name="turn_local")
    async def turn_local(self, turn: FloorTurn) -> FloorReply:
        self._turns_this_run += 1
        content = await workflow.execute_local_activity(
            noop, turn, start_to_close_timeout=timedelta(seconds=30)
        )
        self._turn += 1
        return FloorReply(turn=self._turn, content=content)

    @turn.validator
    def _validate(self, turn: FloorTurn) -> None:
        self._refuse_while_draining()

    @turn_upsert.validator
    def _validate_upsert(self, turn: FloorTurn) -> None:
        self._refuse_while_draining()

    @turn_local.validator
    def _validate_local(self, turn: FloorTurn) -> None:
        self._refuse_while_draining()

    def _refuse_while_draining(self) -> None:
        # As AgentSession: not on the server's suggestion alone (see its _check_send).
        if self._draining or self._turns_this_run >= self._input.max_turns_per_run:
            raise ApplicationError("moving to a new run; retry", type=DRAINING)
