"""PlanAgent: a user's workflow on the turn API that shares its plan or works on another's.

One update runs one turn. ``hold`` parks a turn after it read the shared plan, until the
``release`` signal, so a test can line up two agents' writes on the same version.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow

from statecore.contract._activities import ACT_OPEN_SESSION, OpenSessionInput, SessionSnapshot
from statecore.core._models import SessionRef
from statecore.workflow import TurnSession


class Plan(BaseModel):
    steps: list[str] = Field(default_factory=list)


class PlanTurn(BaseModel):
    turn_id: str
    #: "share" (write the plan, share it), "add" (add a step through ``token``), "read",
    #: "revoke" (revoke ``token``), "share-kv" (share the bucket ``notes``), "count" (add
    #: one to ``notes/count`` through ``token``).
    action: str
    token: str = ""
    step: str = ""
    access: str = "read-write"
    expires_in_seconds: float | None = None
    hold: bool = False


class PlanTurnResult(BaseModel):
    token: str = ""
    share_id: str = ""
    steps: list[str] = Field(default_factory=list)
    version: int | None = None


@workflow.defn(name="PlanAgent")
class PlanAgent:
    @workflow.init
    def __init__(self, ref: SessionRef) -> None:
        self._session = TurnSession(ref, state_type=Plan)
        self._opened = False
        self._released = False
        self.held = 0

    @workflow.run
    async def run(self, ref: SessionRef) -> None:
        await self._session.run_sql(ACT_OPEN_SESSION, OpenSessionInput(ref=ref), SessionSnapshot)
        self._opened = True
        await workflow.wait_condition(lambda: False)

    @workflow.signal
    def release(self) -> None:
        self._released = True

    @workflow.query
    def held_turns(self) -> int:
        return self.held

    @workflow.update
    async def turn(self, request: PlanTurn) -> PlanTurnResult:
        await workflow.wait_condition(lambda: self._opened, timeout=timedelta(seconds=30))
        out = PlanTurnResult()
        async with self._session.turn(request.turn_id) as turn:
            if request.action == "share":
                turn.state.update(Plan(steps=[request.step or "draft"]))
                ticket = await turn.shares.share_state(
                    access=request.access,  # type: ignore[arg-type]
                    expires_in=request.expires_in_seconds,
                )
                out.token, out.share_id = ticket.token, ticket.share_id
            elif request.action == "revoke":
                turn.shares.revoke(request.token)
            elif request.action == "share-kv":
                turn.kv.put("notes", "count", 1)
                ticket = await turn.shares.share_kv("notes", access="read-write")
                out.token, out.share_id = ticket.token, ticket.share_id
            elif request.action == "count":
                notes = await turn.shares.redeem_kv(request.token)
                count = await notes.get("count")
                notes.put("count", count + 1)
                out.version = await notes.get("count")
            else:
                shared = await turn.shares.redeem_state(request.token, Plan)
                plan = await shared.get()
                out.version = shared.version
                if request.hold:
                    self.held += 1
                    await workflow.wait_condition(
                        lambda: self._released, timeout=timedelta(seconds=60)
                    )
                if request.action == "add":
                    shared.update(Plan(steps=[*plan.steps, request.step]))
                    plan = await shared.get()
                out.steps = plan.steps
        return out
