"""ControlledAgent: a user's own workflow on the turn API that resets and compacts its own
session, and a workflow-side check that every statecore code comes back as its class."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from statecore.contract._session import CompactInput, ResetInput
from statecore.core._models import Message, SessionRef, StateOperationResult
from statecore.errors import ERRORS_BY_CODE, from_failure
from statecore.workflow import TurnSession

RAISE_CODE = "test.raise_statecore_code"


@activity.defn(name=RAISE_CODE)
async def raise_code(code: str) -> None:
    """Raise the statecore error of ``code`` the way statecore's activities do."""
    from statecore.activities._failures import typed_errors

    @typed_errors
    async def refuse() -> None:
        raise ERRORS_BY_CODE[code](f"refused with {code}", code_seen=code)

    await refuse()


class Classified(BaseModel):
    code: str
    class_name: str
    message: str
    details: dict[str, str]


@workflow.defn(name="ControlledAgent")
class ControlledAgent:
    @workflow.init
    def __init__(self, ref: SessionRef) -> None:
        self.session = TurnSession(ref)

    @workflow.run
    async def run(self, ref: SessionRef) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def note(self, turn_id: str) -> int:
        async with self.session.turn(turn_id) as turn:
            turn.append(Message(role="user", content=f"note {turn_id}"))
            turn.append(Message(role="assistant", content="noted"))
        return self.session.turn_number

    @workflow.update
    async def reset(self, request: ResetInput) -> StateOperationResult:
        return await self.session.reset(request)

    @workflow.update
    async def reset_stores(self, stores: list[str]) -> StateOperationResult:
        return await self.session.reset(stores=stores)

    @workflow.update
    async def compact(self, request: CompactInput) -> StateOperationResult:
        return await self.session.compact(request)

    @workflow.update
    async def reset_inside_a_turn(self, turn_id: str) -> str:
        async with self.session.turn(turn_id) as turn:
            turn.append(Message(role="user", content="about to reset"))
            try:
                await self.session.reset(all=True)
            except ApplicationError as err:
                # The class, not the string: the workflow catches what a client would.
                return type(from_failure(err)).__name__
        return "reset inside a turn was not refused"

    @workflow.update
    async def classify(self, codes: list[str]) -> list[Classified]:
        """Each code raised by an activity, as workflow code sees it (an ActivityError)."""
        out = []
        for code in codes:
            try:
                await self._raise(code)
            except ActivityError as err:
                error = from_failure(err)
                assert error is not None
                details = {k: str(v) for k, v in error.details.items()}
                out.append(
                    Classified(
                        code=error.code,
                        class_name=type(error).__name__,
                        message=error.message,
                        details=details,
                    )
                )
        return out

    @workflow.update
    async def through_activity(self, code: str) -> None:
        """The activity's failure left to fail the update: a client sees an update failure
        caused by an ActivityError caused by the ApplicationError."""
        await self._raise(code)

    async def _raise(self, code: str) -> None:
        await workflow.execute_activity(
            RAISE_CODE,
            code,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
