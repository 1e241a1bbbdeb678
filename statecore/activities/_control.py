"""Control activities: open/close a session, describe, reset, compact, add a hint.

Each returns the operation's report plus a fresh snapshot of the session's counters, so the
workflow's checkpoint and cached describe report stay in step with SQL after every change.
"""

from __future__ import annotations

from temporalio import activity

from statecore.activities._failures import typed_errors
from statecore.activities._resources import WorkerResources
from statecore.contract._activities import (
    ACT_ADD_HINT,
    ACT_CLOSE_SESSION,
    ACT_COMPACT,
    ACT_DESCRIBE,
    ACT_OPEN_SESSION,
    ACT_RESET,
    ControlInput,
    ControlResult,
    OpenSessionInput,
    SessionSnapshot,
)
from statecore.contract._session import TurnBudget
from statecore.core._errors import UnknownAgentError
from statecore.core._models import StateOperationResult
from statecore.llm import ModelSummarizer
from statecore.observability._metrics import record_compaction
from statecore.operations import _control_plane as control
from statecore.operations._change_records import record, session_event
from statecore.operations._compaction import CompactionRequest
from statecore.operations._turn_commit import snapshot
from statecore.store import StoreTransaction, run_transaction


class ControlActivities:
    def __init__(self, resources: WorkerResources) -> None:
        self._r = resources

    async def _result(self, input: ControlInput, report: StateOperationResult) -> ControlResult:
        snap = await run_transaction(self._r.store, lambda tx: snapshot(tx, input.ref))
        return ControlResult(report=report, snapshot=snap)

    @activity.defn(name=ACT_OPEN_SESSION)
    @typed_errors
    async def open_session(self, input: OpenSessionInput) -> SessionSnapshot:
        """Create the session row if needed and read where it stands: a first start, or a
        session reopened after it closed, continues from SQL."""

        async def open_and_read(tx: StoreTransaction) -> SessionSnapshot:
            info = await tx.sessions.ensure(input.ref, ttl_seconds=input.ttl_seconds)
            if input.system_prompt is not None and input.system_prompt != info.system_prompt:
                await tx.conversation.set_system_prompt(input.ref, input.system_prompt)
            return await snapshot(tx, input.ref)

        snap = await run_transaction(self._r.store, open_and_read)
        report = await control.describe(self._r.store, input.ref)
        return snap.model_copy(
            update={
                "stores": [s.model_dump(mode="json") for s in report.stores],
                "budget": self._budget(input),
            }
        )

    def _budget(self, input: OpenSessionInput) -> TurnBudget | None:
        """The budget the session's turns get here, so its update validator can refuse a
        message that can never fit from the first turn on. None when a framework agent
        answers (it assembles its own context) or no such model is registered (the turn
        then fails with UnknownAgent)."""
        if self._r.agent_for(input.model, input.ref.agent_id) is not None:
            return None
        try:
            model = self._r.model(input.model)
        except UnknownAgentError:
            return None
        return self._r.turn_budget(model, input.profile)

    @activity.defn(name=ACT_DESCRIBE)
    @typed_errors
    async def describe(self, input: ControlInput) -> ControlResult:
        report = await control.describe(self._r.store, input.ref, include_data=input.include_data)
        return await self._result(input, report)

    @activity.defn(name=ACT_RESET)
    @typed_errors
    async def reset(self, input: ControlInput) -> ControlResult:
        report = await control.reset(self._r.store, input.ref, stores=input.stores or None)
        after = await control.describe(self._r.store, input.ref)
        report.stores = after.stores
        return await self._result(input, report)

    @activity.defn(name=ACT_COMPACT)
    @typed_errors
    async def compact(self, input: ControlInput) -> ControlResult:
        raw = input.compact.model_dump(exclude_none=True) if input.compact else {}
        if raw.get("strategy") == "summarize" and "max_tokens" not in raw:
            # Summarize once the window passes the profile's threshold.
            raw["max_tokens"] = input.profile.summarization_threshold
        request = CompactionRequest.model_validate(raw)
        summarizer = ModelSummarizer(self._r.model(input.model))
        report = await control.compact(
            self._r.store, input.ref, request, summarizer=summarizer, counter=self._r.counter
        )
        if report.compacted:
            record_compaction(activity.metric_meter(), request.strategy)
        after = await control.describe(self._r.store, input.ref)
        report.stores = after.stores
        return await self._result(input, report)

    @activity.defn(name=ACT_ADD_HINT)
    @typed_errors
    async def add_hint(self, input: ControlInput) -> ControlResult:

        async def add(tx: StoreTransaction) -> None:
            await tx.sessions.ensure(input.ref)
            hint = await tx.conversation.add_hint(input.ref, input.hint or "")
            await record(tx, input.ref.namespace, [session_event("hint", input.ref, id=hint.id)])

        await run_transaction(self._r.store, add)
        report = await control.describe(self._r.store, input.ref)
        return await self._result(input, report)

    @activity.defn(name=ACT_CLOSE_SESSION)
    @typed_errors
    async def close_session(self, input: ControlInput) -> ControlResult:
        """Closing keeps the SQL state unless the session's policy says delete (``stores``
        holds ``"*"`` then): a later message reopens the session from it."""
        if "*" in input.stores:
            report = await control.reset(self._r.store, input.ref)
        else:
            report = await control.describe(self._r.store, input.ref)
        return await self._result(input, report)
