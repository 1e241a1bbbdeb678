"""The turn API, for use inside any Temporal workflow (sandbox-safe).

::

    session = TurnSession(SessionRef(agent_id="planner", session_id=sid), state_type=Plan)

    async with session.turn(turn_id) as turn:
        turn.append(Message(role="user", content=text))
        plan = await turn.state.get()               # loaded once, by a local activity
        turn.state.update(plan.model_copy(update={"step": 2}))
        turn.kv.put("notes", "last", {"text": text})
        reply = await turn.respond()                # model call + commit of everything above

Changes made during a turn are buffered in the workflow and committed by ONE activity, in one
SQL transaction, when the turn ends (a turn-level transaction): the code inside the
turn sees its own updates; the host sees them only after commit; an exception inside the block
discards them all. ``respond()`` fuses the final model call and the commit into one activity,
which is why a chat turn costs one activity round trip. The transcript and the assembled
context never pass through workflow history: activities read them from SQL by reference.

If your workflow takes turns as Updates and continues as new, do what AgentSession does:
let its update validator refuse turns on the run's own state (a draining flag your run loop
sets), never on ``workflow.info().is_continue_as_new_suggested()`` or the history length.
Those change with every task, and temporalio wakes no waiting code in a task whose updates
were all refused: a turn refused on the suggestion alone leaves the run loop asleep, and the
session refuses every later turn too (``statecore/agent_session/_workflow.py``, ``_check_send``).

Only temporalio, pydantic and statecore's pure models are imported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

from statecore.contract._activities import (
    ACT_COMMIT_TURN,
    ACT_GENERATE,
    CommitTurnInput,
    CommitTurnResult,
    GenerateInput,
    GenerateResult,
    OrchestrationOp,
)
from statecore.contract._session import CompactInput, ResetInput, SendMessageInput
from statecore.core._limits import DEFAULT_MODEL_ATTEMPTS, MAX_ACTIVITY_INPUT_BYTES
from statecore.core._models import (
    Message,
    SessionRef,
    StateOperationResult,
    TokenUsage,
    validate_turn_id,
)
from statecore.core._profile import SessionProfile
from statecore.workflow import _control as control
from statecore.workflow._activity_calls import (
    SQL_RETRY,
    checked,
    model_retry_policy,
    reraise_activity_error,
)
from statecore.workflow._buffers import TurnFlow, TurnKV, TurnState
from statecore.workflow._shares import TurnShares

TState = TypeVar("TState", bound=BaseModel)


class TurnSession:
    """A session as seen from workflow code: where its state lives and how to call it."""

    def __init__(
        self,
        ref: SessionRef,
        *,
        profile: SessionProfile | None = None,
        model: str = "default",
        state_type: type[BaseModel] | None = None,
        sql_timeout: timedelta = timedelta(seconds=30),
        sql_schedule_timeout: timedelta = timedelta(minutes=10),
        model_timeout: timedelta = timedelta(minutes=2),
        model_heartbeat: timedelta = timedelta(seconds=30),
        model_attempts: int = DEFAULT_MODEL_ATTEMPTS,
    ) -> None:
        self.ref = ref
        self.profile = profile or SessionProfile()
        self.model = model
        self.state_type = state_type
        self.sql_timeout = sql_timeout
        self.sql_schedule_timeout = sql_schedule_timeout
        self.model_timeout = model_timeout
        self.model_heartbeat = model_heartbeat
        #: Attempts of a model call that fails as transient before the turn fails with it.
        self.model_retry = model_retry_policy(model_attempts)
        #: The number of the last committed turn; the next turn gets ``turn_number + 1``.
        self.turn_number = 0
        #: Turn blocks of this session open now (reset and compact run between turns).
        self.open_turns = 0

    def turn(self, turn_id: str) -> Turn:
        return Turn(self, turn_id)

    def turn_for(self, request: SendMessageInput) -> Turn:
        """The turn a parsed ``send_message`` request asks for: its id was checked when the
        request was parsed, so it is not checked again."""
        return Turn._of_checked_id(self, request.turn_id)

    async def reset(
        self, request: ResetInput | None = None, *, stores: Sequence[str] = (), all: bool = False
    ) -> StateOperationResult:
        """Clear stores of this session, as the operator contract's ``reset``: name them
        (``stores=["conversation", "kv"]``) or ``all=True``; naming nothing is refused with
        ResetRefused. Between turns only (``statecore.workflow._control``)."""
        return await control.reset_session(self, request, {"stores": list(stores), "all": all})

    async def compact(
        self,
        request: CompactInput | None = None,
        *,
        strategy: str = "tokens",
        max_tokens: int | None = None,
        max_messages: int | None = None,
    ) -> StateOperationResult:
        """Compact this session's context window, as the operator contract's ``compact``
        (strategies ``recent``, ``tokens``, ``summarize``). Between turns only."""
        fields = {"strategy": strategy, "max_tokens": max_tokens, "max_messages": max_messages}
        return await control.compact_session(self, request, fields)

    async def run_sql(self, name: str, arg: BaseModel, result_type: Any) -> Any:
        """Run one of statecore's short SQL activities as a local activity."""
        try:
            return await workflow.execute_local_activity(
                name,
                arg,
                result_type=result_type,
                start_to_close_timeout=self.sql_timeout,
                schedule_to_close_timeout=self.sql_schedule_timeout,
                retry_policy=SQL_RETRY,
            )
        except ActivityError as err:
            raise reraise_activity_error(err) from err

    async def run_model(self, arg: GenerateInput) -> GenerateResult:
        # Encoded once, here: its size is checked and the same payload is sent (a RawValue
        # passes through the converter as it is; the codec, if any, still applies).
        [payload] = workflow.payload_converter().to_payloads([arg])
        size = len(payload.data)
        if size > MAX_ACTIVITY_INPUT_BYTES:
            raise ApplicationError(
                f"this turn's messages and buffered changes are {size} bytes as JSON; a model "
                f"call can carry at most {MAX_ACTIVITY_INPUT_BYTES}. Commit large state with "
                "turn.commit() (no model call), or store large data by reference",
                type="ContentTooLarge",
                non_retryable=True,
            )
        try:
            result: GenerateResult = await workflow.execute_activity(
                ACT_GENERATE,
                RawValue(payload),
                result_type=GenerateResult,
                start_to_close_timeout=self.model_timeout,
                heartbeat_timeout=self.model_heartbeat,
                retry_policy=self.model_retry,
            )
            return result
        except ActivityError as err:
            raise reraise_activity_error(err) from err


class Turn:
    """One turn. Use as ``async with session.turn(turn_id) as turn``; see module docstring."""

    def __init__(self, session: TurnSession, turn_id: str) -> None:
        checked(lambda: validate_turn_id(turn_id))
        self._open(session, turn_id)

    @classmethod
    def _of_checked_id(cls, session: TurnSession, turn_id: str) -> Turn:
        """A turn whose id was checked already (``TurnSession.turn_for``)."""
        turn = cls.__new__(cls)
        turn._open(session, turn_id)
        return turn

    def _open(self, session: TurnSession, turn_id: str) -> None:
        self.session = session
        self.turn_id = turn_id
        self.messages: list[Message] = []
        self.kv = TurnKV(session)
        self.flow = TurnFlow(session)
        self.state: TurnState[Any] = TurnState(session)
        #: Share tokens: grant access to this session's state, or redeem another's.
        self.shares = TurnShares(session)
        self._orchestration = OrchestrationOp()
        self._usage = TokenUsage()
        self.context_tokens = 0
        #: Set once the turn committed (or was found already committed).
        self.result: CommitTurnResult | None = None

    async def __aenter__(self) -> Turn:
        self.session.open_turns += 1
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None and self.result is None:
                await self.commit()
            # On an exception the buffer is simply dropped: nothing was written.
        finally:
            self.session.open_turns -= 1

    def append(self, message: Message | Sequence[Message]) -> None:
        """Buffer message(s) of this turn; they are stored at commit, in order."""
        if isinstance(message, Message):
            self.messages.append(message)
        else:
            self.messages.extend(message)

    def set_active_step(self, step: str | None) -> None:
        self._orchestration.active_step = step
        self._orchestration.set_active_step = True

    def used_tool(self, tool: str) -> None:
        self._orchestration.used_tools.append(tool)

    def advance_sequence(self) -> None:
        self._orchestration.advance_sequence += 1

    def _commit_input(self) -> CommitTurnInput:
        return CommitTurnInput(
            ref=self.session.ref,
            turn_id=self.turn_id,
            turn=self.session.turn_number + 1,
            messages=list(self.messages),
            kv=list(self.kv._ops),
            flow=list(self.flow._ops),
            state=self.state._op(),
            orchestration=self._orchestration,
            usage=self._usage,
            shares=self.shares._changes(),
        )

    async def generate(self, *, tools: list[dict[str, Any]] | None = None) -> Message:
        """Ask the model for the next message (context assembled from SQL plus this turn's
        buffered messages) and buffer it. For intermediate steps such as tool calls."""
        out = await self.session.run_model(
            GenerateInput(
                ref=self.session.ref,
                turn_id=self.turn_id,
                pending=list(self.messages),
                profile=self.session.profile,
                model=self.session.model,
                tools=tools or [],
            )
        )
        self._usage = self._usage + out.usage
        self.context_tokens = out.context_tokens
        self.messages.append(out.message)
        return out.message

    async def respond(
        self, *, tools: list[dict[str, Any]] | None = None, stream: bool = False
    ) -> GenerateResult:
        """The final model call of the turn, committed together with everything the turn
        buffered, in the same activity. A turn id that already committed returns its stored
        result without calling the model. ``stream``: publish the reply's text while it is
        generated, for ``AgentSessionClient.stream`` readers (docs/streaming.md)."""
        out = await self.session.run_model(
            GenerateInput(
                ref=self.session.ref,
                turn_id=self.turn_id,
                profile=self.session.profile,
                model=self.session.model,
                tools=tools or [],
                commit=self._commit_input(),
                stream=stream,
            )
        )
        assert out.commit is not None
        committed = self._finish(out.commit)
        out.commit = committed
        if not committed.duplicate:
            self.messages.append(out.message)
            self._usage = self._usage + out.usage
        self.context_tokens = out.context_tokens
        return out

    async def commit(self) -> CommitTurnResult:
        """Commit the buffered changes now (done automatically when the block exits)."""
        result: CommitTurnResult = await self.session.run_sql(
            ACT_COMMIT_TURN, self._commit_input(), CommitTurnResult
        )
        return self._finish(result)

    def _finish(self, result: CommitTurnResult) -> CommitTurnResult:
        # The activity reports "already committed" whenever it finds the turn record, also
        # when the record is this very turn's, written by an earlier attempt whose completion
        # was lost (worker killed after the commit). Only a turn numbered at or below the last
        # one this session counted was committed before this turn began.
        own_commit = result.turn > self.session.turn_number
        if result.duplicate and own_commit:
            result = result.model_copy(update={"duplicate": False})
        self.result = result
        self.session.turn_number = max(self.session.turn_number, result.turn)
        return result
