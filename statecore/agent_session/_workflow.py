"""AgentSession: one long-running workflow per (agent_id, session_id).

Its fields hold only a small checkpoint (``TurnCheckpoint``); the conversation and every other
store live in SQL and are reached by activities. Operators steer it with signals (pause,
resume, reset, compact, add_hint, migrate, close), programs with updates (send_message,
reset_state, compact_state, describe_state), and anyone inspects it with the ``describe``
query. See docs/operators.md for the contract.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from statecore.agent_session._budget_admission import BudgetAdmission
from statecore.agent_session._handler_payloads import (
    NO_INPUT,
    decode_payload,
    parse_request,
    received_size,
)
from statecore.agent_session._session_view import (
    SearchAttributes,
    current_details,
    session_report,
    stores_from_checkpoint,
    without_data,
)
from statecore.agent_session._start_input import session_input
from statecore.contract._activities import (
    ACT_ADD_HINT,
    ACT_CLOSE_SESSION,
    ACT_COMPACT,
    ACT_DESCRIBE,
    ACT_OPEN_SESSION,
    ACT_RESET,
    CommitTurnResult,
    ControlInput,
    ControlResult,
    OpenSessionInput,
    SessionSnapshot,
)
from statecore.contract._session import (
    QUERY_DESCRIPTIONS,
    RECENT_REJECTIONS,
    RECENT_TURN_IDS,
    SIGNAL_DESCRIPTIONS,
    UNKNOWN_SIGNAL_DESCRIPTION,
    UNKNOWN_UPDATE_DESCRIPTION,
    UPDATE_DESCRIPTIONS,
    WORKFLOW_TYPE,
    AddHintInput,
    CloseInput,
    CompactInput,
    DescribeInput,
    MigrateInput,
    PauseInput,
    Rejection,
    ReplyMessage,
    ResetInput,
    ResumeInput,
    SendMessageInput,
    SessionReport,
    TurnCheckpoint,
    TurnResult,
    check_turn_request_size,
    unknown_operation_message,
)
from statecore.core._errors import (
    StatecoreError,
    UnknownAgentError,
    UnknownOperationError,
)
from statecore.core._models import (
    SessionStatus,
    StateOperationResult,
    StateStoreReport,
    TokenUsage,
)
from statecore.observability._metrics import record_rejection
from statecore.workflow import TurnSession
from statecore.workflow._activity_calls import refusal

#: Behaviour changes made after histories existed; old runs replay the old way.
#: A reset that names nothing (``{}``) used to clear every store; now it is refused.
PATCH_RESET_NAMES_STORES = "statecore-reset-names-stores"
#: Pause, resume and close sent while a run drains for continue-as-new used to be lost.
PATCH_CARRY_CONTROL = "statecore-carry-control-across-continue-as-new"
#: A session opened by a turn that named a model no worker has ends after refusing it.
PATCH_UNKNOWN_MODEL_ENDS_NEW_SESSION = "statecore-unknown-model-ends-new-session"
#: A cancellation request used to cancel the run; now it closes the session cleanly.
PATCH_CLOSE_ON_CANCEL = "statecore-close-on-cancel"
#: A run used to continue as new only at max_turns_per_run or the server's suggestion; now a
#: run that has done work also moves on after idle_continue_seconds without any.
PATCH_IDLE_CONTINUE = "statecore-idle-continue-as-new"


# Outside the workflow sandbox: re-entering it cost every activation and every payload
# conversion of a turn a compile and run of a code string, about 1 ms of worker CPU per turn
# (bench/README.md at 74815d7, "Worker CPU per turn against the floor"). What the sandbox
# guards, determinism, is kept by the import contracts (this module reaches only temporalio,
# pydantic and statecore's pure modules; docs/architecture.md) and by replaying recorded
# histories (test_replay.py).
# Workflows of your own that use the turn API run in your sandbox as before.
@workflow.defn(name=WORKFLOW_TYPE, sandboxed=False)
class AgentSession:
    # The input is taken raw (statecore.agent_session._start_input): a start whose input is not a
    # session's, or whose id is not the one its input makes, fails the run at once instead of
    # leaving a workflow task that fails on every retry.
    @workflow.init
    def __init__(self, payload: RawValue) -> None:
        input, self._start_error = session_input(payload)
        self._input = input
        self._cp = input.checkpoint.model_copy(deep=True) if input.checkpoint else TurnCheckpoint()
        self._session = TurnSession(
            input.ref,
            profile=input.profile,
            model=input.model,
            model_timeout=timedelta(seconds=input.model_timeout_seconds),
            model_heartbeat=timedelta(seconds=input.model_heartbeat_seconds),
            model_attempts=input.model_attempts,
        )
        self._session.turn_number = self._cp.turn
        # One turn or control operation at a time, in arrival order.
        self._lock = asyncio.Lock()
        self._rejections: deque[Rejection] = deque(input.rejections, maxlen=RECENT_REJECTIONS)
        #: The turn being answered and since when, for the current details (no history).
        self._answering: tuple[str, datetime] | None = None
        #: Requests the send_message validator accepted, by update id, until their handler
        #: (which runs next, in the same task) takes them.
        self._validated_sends: dict[str, SendMessageInput] = {}
        self._stores: list[StateStoreReport] = []
        self._turns_this_run = 0
        #: Turns and SQL operations this run has run: an idle run without any stays put.
        self._work_this_run = 0
        #: Whether this run continues as new when idle (decided once, at the run's start).
        self._idle_continue = False
        #: Whether the run loop's wait also ends when this run becomes worth leaving.
        self._wake_when_long = False
        # A run begun by an idle continue-as-new counts the TTL from the session's last
        # activity in the run before (0 otherwise).
        self._last_activity = workflow.now() - timedelta(seconds=input.idle_carried_seconds)
        self._close: CloseInput | None = None
        self._migrate_to: str | None = None
        self._opened = input.checkpoint is not None
        self._search_attributes = SearchAttributes()
        #: The status the next run starts in, kept while this one drains (pause and resume
        #: sent then apply to the next run).
        self._resume_status: SessionStatus = "active"
        self._budget = BudgetAdmission()

    # --- the run -----------------------------------------------------------------------------

    @workflow.run
    async def run(self, payload: RawValue) -> SessionReport:
        if self._start_error is not None:
            raise self._start_error
        input = self._input
        if input.checkpoint is None:
            snapshot: SessionSnapshot = await self._session.run_sql(
                ACT_OPEN_SESSION,
                OpenSessionInput(
                    ref=input.ref,
                    system_prompt=input.system_prompt,
                    ttl_seconds=input.ttl_seconds,
                    model=input.model,
                    profile=input.profile,
                ),
                SessionSnapshot,
            )
            self._apply_snapshot(snapshot)
            self._opened = True
        if self._cp.status in ("draining", "closed"):
            self._cp.status = "active"
        self._sync_search_attributes()
        self._show()
        # Asked only when enabled: a session that never continues when idle writes no marker.
        self._idle_continue = input.idle_continue_seconds > 0 and workflow.patched(
            PATCH_IDLE_CONTINUE
        )

        while True:
            idle_for = workflow.now() - self._last_activity
            remaining = timedelta(seconds=input.ttl_seconds) - idle_for
            # Until this run is worth leaving (_long_enough) it waits for the TTL only, and
            # wakes when it becomes so to wait for the idle time instead (one timer at a time:
            # a busy run re-arms it at most once per idle period, never per turn).
            long_enough = self._idle_continue and self._long_enough()
            if long_enough:
                # With a turn in flight, a whole idle period: idle counts from its end.
                until_idle = self._idle_limit() - (
                    timedelta(0) if self._lock.locked() else idle_for
                )
                remaining = min(remaining, until_idle)
            try:
                self._wake_when_long = self._idle_continue and not long_enough
                await workflow.wait_condition(
                    lambda: (
                        self._close is not None
                        or self._should_continue()
                        or (self._wake_when_long and self._long_enough())
                    ),
                    timeout=max(remaining, timedelta(seconds=1)),
                )
            except TimeoutError:
                idle = workflow.now() - self._last_activity
                if idle >= timedelta(seconds=input.ttl_seconds) and not self._lock.locked():
                    self._close = CloseInput(delete_state=input.delete_on_close)
                    self._cp.last_operation = "closed: idle past TTL"
                elif self._idle_continue_due(idle):
                    try:
                        await self._continue_as_new(idle=True)
                    except asyncio.CancelledError:
                        self._close_on_cancel()
                continue
            except asyncio.CancelledError:
                self._close_on_cancel()
                continue
            if self._idle_continue and self._close is None and not self._should_continue():
                continue  # woken as the run became worth leaving: wait for the idle time
            if self._close is not None:
                return await self._finish_closed(self._close)
            try:
                await self._continue_as_new()
            except asyncio.CancelledError:
                self._close_on_cancel()

    def _close_on_cancel(self) -> None:
        """A cancellation request (the Web UI's "Request Cancellation", ``temporal workflow
        cancel``, ``handle.cancel()``) closes the session like ``close``: the turn in flight
        commits, the state stays in SQL, the status becomes ``closed``."""
        if not workflow.patched(PATCH_CLOSE_ON_CANCEL):
            raise asyncio.CancelledError  # a run recorded before: it was cancelled
        if self._close is None:
            self._close = CloseInput()
        self._cp.last_operation = "closed: cancellation requested"

    def _idle_limit(self) -> timedelta:
        return timedelta(seconds=self._input.idle_continue_seconds)

    def _long_enough(self) -> bool:
        """Whether this run is worth leaving when idle: it has done work (so an idle session
        continues once, not forever) and holds idle_continue_min_events events (a shorter
        run replays in a few milliseconds, less than a new run costs the server)."""
        return (
            self._work_this_run > 0
            and workflow.info().get_current_history_length() >= self._input.idle_continue_min_events
        )

    def _idle_continue_due(self, idle: timedelta) -> bool:
        """Whether this run moves on because the session went idle: it is long enough,
        nothing is in flight, and nothing has happened for idle_continue_seconds."""
        return (
            self._idle_continue
            and self._long_enough()
            and idle >= self._idle_limit()
            and not self._lock.locked()
        )

    def _should_continue(self) -> bool:
        return self._must_continue() or workflow.info().is_continue_as_new_suggested()

    def _must_continue(self) -> bool:
        """The reasons to move on that this run's own state holds (not the server's hint)."""
        return self._migrate_to is not None or self._turns_this_run >= self._input.max_turns_per_run

    async def _continue_as_new(self, *, idle: bool = False) -> None:
        """Drain, then continue as new with the checkpoint; returns instead when a close
        arrived while draining (the run loop then closes the session)."""
        self._resume_status = self._cp.status if self._cp.status != "draining" else "active"
        if not (idle and workflow.all_handlers_finished()):
            # Drain: the validator now rejects new turns as retryable, in-flight ones finish.
            # An idle run with nothing in flight moves on in this very task (an update that
            # arrives meanwhile fails the task's completion, and it runs again with it), so
            # it skips the draining status and its two search-attribute writes.
            self._cp.status = "draining"
            self._sync_search_attributes()
            await workflow.wait_condition(workflow.all_handlers_finished)
        # Every handler has finished, and no signal or update can arrive between here and
        # the continue-as-new command (one arriving now fails this task's completion, and
        # the task runs again with it): what they asked for is applied or carried below.
        if self._close is not None and workflow.patched(PATCH_CARRY_CONTROL):
            self._cp.status = self._resume_status
            return
        checkpoint = self._cp.model_copy(deep=True)
        checkpoint.status = self._resume_status
        checkpoint.runs += 1
        target = self._migrate_to or None
        if target:
            checkpoint.last_operation = f"migrated to task queue {target}"
        carried: dict[str, Any] = {"checkpoint": checkpoint, "rejections": list(self._rejections)}
        if self._idle_continue:
            idle_for = workflow.now() - self._last_activity
            carried["idle_carried_seconds"] = max(0.0, idle_for.total_seconds())
        next_input = self._input.model_copy(update=carried)
        workflow.continue_as_new(next_input, task_queue=target)

    async def _finish_closed(self, close: CloseInput) -> SessionReport:
        self._cp.status = "closed"
        self._sync_search_attributes()
        await workflow.wait_condition(workflow.all_handlers_finished)
        delete = close.delete_state or self._input.delete_on_close
        await self._session.run_sql(
            ACT_CLOSE_SESSION,
            ControlInput(ref=self._input.ref, stores=[] if not delete else ["*"]),
            ControlResult,
        )
        self._cp.last_operation = (self._cp.last_operation or "closed") + (
            "; state deleted" if delete else "; state kept in SQL"
        )
        self._show()
        return self._describe(False)

    # --- turns -------------------------------------------------------------------------------

    # Every handler takes its input as exactly ``RawValue`` (NO_INPUT when nothing was sent)
    # and decodes it itself (statecore.agent_session._handler_payloads): a payload the SDK could not
    # decode gets a typed rejection instead of being dropped or failing the workflow task.

    @workflow.update(name="send_message", description=UPDATE_DESCRIPTIONS["send_message"])
    async def send_message(self, payload: RawValue = NO_INPUT) -> TurnResult:
        input = self._accepted_send(payload)
        # With update-with-start this handler runs in the same task as the run's start: the
        # session must be loaded from SQL before the first turn is numbered.
        await workflow.wait_condition(lambda: self._opened)
        async with self._lock:
            self._turns_this_run += 1
            self._work_this_run += 1
            self._last_activity = workflow.now()
            self._answering = (input.turn_id, workflow.now())
            self._show()
            try:
                async with self._session.turn_for(input) as turn:
                    turn.append(input.to_message())
                    out = await turn.respond(stream=input.stream)
            except ApplicationError as err:
                self._forget_unknown_model(err)
                raise
            finally:
                self._answering = None
            commit = out.commit
            assert commit is not None
            if out.budget is not None:
                self._cp.budget = out.budget  # the validator's budget from now on
            reply = ReplyMessage(
                content=out.message.content,
                tool_calls=[c.model_dump() for c in out.message.tool_calls],
            )
            result = TurnResult(
                turn=commit.turn,
                turn_id=input.turn_id,
                reply=reply,
                usage=out.usage,
                first_seq=commit.first_seq,
                last_seq=commit.last_seq,
                context_tokens=out.context_tokens,
                duplicate=commit.duplicate,
            )
            if not commit.duplicate:
                self._after_turn(input.turn_id, commit, out.usage)
                if self._needs_summary():
                    # Inside this turn's lock hold, so no other turn sees a half-moved window.
                    # The turn has committed: a failed summary is recorded, not the turn's error.
                    await self._guarded(
                        "auto_compact",
                        self._run_compact(CompactInput(strategy="summarize"), source="auto"),
                    )
            self._show()
            if self._idle_continue:
                self._last_activity = workflow.now()  # idle counts from the turn's end
            return result

    def _forget_unknown_model(self, err: ApplicationError) -> None:
        """A session that no turn has committed to, opened by a send naming a model (or
        agent) this worker does not have, ends after refusing that turn: the model was fixed
        when the session opened, so it would refuse every later turn the same way. Its SQL
        state stays; the next send opens it again with the model that send names."""
        if not (err.type == UnknownAgentError.code and self._cp.turn == 0 and self._close is None):
            return
        if not workflow.patched(PATCH_UNKNOWN_MODEL_ENDS_NEW_SESSION):
            return
        self._close = CloseInput()
        self._cp.last_operation = (
            f"closed: its first turn named model {self._input.model!r}, which no worker has"
        )

    @send_message.validator
    def _validate_send(self, payload: RawValue = NO_INPUT) -> None:
        # Synchronous and read-only: a rejection here adds nothing to history, so the metric
        # (the workflow meter, silent on replay) is the only trace it leaves.
        try:
            self._check_send(payload)
        except ApplicationError as err:
            record_rejection(workflow.metric_meter(), "send_message", err.type or "Rejected")
            raise

    def _check_send(self, payload: Any) -> None:
        if self._start_error is not None:
            raise self._start_error  # this run is not a session's; it fails at once
        status = self._cp.status
        if status == "paused":
            raise refusal(
                "SessionPaused",
                f"session is paused ({self._cp.pause_reason}); send the resume signal first",
            )
        if status == "closed" or self._close is not None:
            raise refusal("SessionClosed", "session is closing; send again to reopen it")
        # Not the server's continue-as-new suggestion: it can first show in a task that
        # carries nothing but this update. The SDK wakes no waiting code for a task of
        # refused updates only (they leave no history to replay), so the run would never
        # start draining and every later turn would be refused too. Admitted, this turn
        # wakes the run, which drains after it.
        if status == "draining" or self._must_continue():
            raise refusal(
                "SessionDraining", "session is moving to a new run; retry", retryable=True
            )
        message: SendMessageInput = self._parse_or_raise("send_message", SendMessageInput, payload)
        try:
            check_turn_request_size(message, received_size(payload))
        except StatecoreError as err:
            raise refusal(err.code, err.message) from None
        self._budget.check(message, self._input.profile.max_tokens, self._cp.budget)
        # The handler that runs next, in the same task, takes this parse (``_accepted_send``).
        update = workflow.current_update_info()
        if update is not None:
            self._validated_sends[update.id] = message

    def _accepted_send(self, payload: Any) -> SendMessageInput:
        """The request the validator parsed for this update, or, where no validator ran (a
        replay: the SDK runs validators only when an update first arrives), a parse of its
        own: the same payload, the same result."""
        update = workflow.current_update_info()
        parsed = self._validated_sends.pop(update.id, None) if update is not None else None
        if parsed is not None:
            return parsed
        checked: SendMessageInput = self._parse_or_raise("send_message", SendMessageInput, payload)
        return checked

    def _after_turn(self, turn_id: str, commit: CommitTurnResult, usage: TokenUsage) -> None:
        cp = self._cp
        cp.turn = commit.turn
        cp.take_counters(commit)
        cp.usage = cp.usage + usage
        cp.recent_turn_ids = [*cp.recent_turn_ids, turn_id][-RECENT_TURN_IDS:]
        cp.last_operation = f"turn {commit.turn}"
        for store in self._stores:
            # The cached report's one SQL counter a turn changes (its record is new).
            records = store.metadata.get("turn_records")
            if store.name == "conversation" and isinstance(records, int):
                store.metadata["turn_records"] = records + 1
        self._sync_search_attributes(after_turn=True)

    def _needs_summary(self) -> bool:
        return (
            self._input.auto_summarize
            and self._cp.window_tokens > self._input.profile.summarization_threshold
        )

    # --- control: signals (operators) and updates (programs) ---------------------------------

    def _parse(self, operation: str, model: type[BaseModel], payload: Any) -> Any:
        """Validate raw signal input; a bad payload is recorded, never fatal."""
        try:
            return parse_request(operation, model, payload)
        except StatecoreError as err:
            self._record_rejection(operation, err)
            return None

    def _record_rejection(self, operation: str, err: StatecoreError | ApplicationError) -> None:
        code = err.code if isinstance(err, StatecoreError) else (err.type or "InvalidInput")
        message = (err.message or type(err).__name__).splitlines()[0]
        workflow.logger.warning(
            "rejected %s: %s (%s)",
            operation,
            message,
            code,
            extra={"session_id": self._input.session_id, "agent_id": self._input.agent_id},
        )
        record_rejection(workflow.metric_meter(), operation, str(code))
        self._rejections.append(
            Rejection(
                operation=operation, code=str(code), message=message[:500], turn=self._cp.turn
            )
        )
        self._show()  # operators see the rejection in the UI at once

    @workflow.signal(name="pause", description=SIGNAL_DESCRIPTIONS["pause"])
    async def pause(self, payload: RawValue = NO_INPUT) -> None:
        req = self._parse("pause", PauseInput, payload)
        if req is None:
            return
        if self._cp.status == "active":
            self._cp.status = "paused"
        elif self._cp.status == "draining" and workflow.patched(PATCH_CARRY_CONTROL):
            self._resume_status = "paused"  # the next run starts paused
        self._cp.pause_reason = req.reason
        self._cp.last_operation = f"paused: {req.reason}"
        self._sync_search_attributes()
        self._show()

    @workflow.signal(name="resume", description=SIGNAL_DESCRIPTIONS["resume"])
    async def resume(self, payload: RawValue = NO_INPUT) -> None:
        if self._parse("resume", ResumeInput, payload) is None:
            return
        if self._cp.status == "paused":
            self._cp.status = "active"
        elif self._cp.status == "draining" and workflow.patched(PATCH_CARRY_CONTROL):
            self._resume_status = "active"
        self._cp.pause_reason = None
        self._cp.last_operation = "resumed"
        self._last_activity = workflow.now()
        self._sync_search_attributes()
        self._show()

    @workflow.signal(name="reset", description=SIGNAL_DESCRIPTIONS["reset"])
    async def reset_signal(self, payload: RawValue = NO_INPUT) -> None:
        try:
            req = self._reset_request("reset", payload)
        except StatecoreError as err:
            self._record_rejection("reset", err)
            return
        await self._guarded("reset", self._reset(req))

    @workflow.update(name="reset_state", description=UPDATE_DESCRIPTIONS["reset_state"])
    async def reset_state(self, payload: RawValue = NO_INPUT) -> SessionReport:
        try:
            req = self._reset_request("reset_state", payload)
        except StatecoreError as err:
            raise refusal(err.code, err.message) from None
        return await self._reset(req)

    def _reset_request(self, operation: str, payload: Any) -> ResetInput:
        """The reset asked for. One that names nothing is refused (ResetRefused) unless its
        run was recorded when ``{}`` meant every store."""
        value = decode_payload(operation, payload)
        if value in (None, {}, {"stores": []}) and not workflow.patched(PATCH_RESET_NAMES_STORES):
            value = {"all": True}
        return parse_request(operation, ResetInput, value)

    @workflow.signal(name="compact", description=SIGNAL_DESCRIPTIONS["compact"])
    async def compact_signal(self, payload: RawValue = NO_INPUT) -> None:
        req = self._parse("compact", CompactInput, payload)
        if req is not None:
            await self._guarded("compact", self._compact(req, source="operator"))

    @workflow.update(name="compact_state", description=UPDATE_DESCRIPTIONS["compact_state"])
    async def compact_state(self, payload: RawValue = NO_INPUT) -> SessionReport:
        req = self._parse_or_raise("compact_state", CompactInput, payload)
        return await self._compact(req, source="update")

    @workflow.update(name="describe_state", description=UPDATE_DESCRIPTIONS["describe_state"])
    async def describe_state(self, payload: RawValue = NO_INPUT) -> SessionReport:
        """A fresh report read from SQL (the query answers from the cached one)."""
        req = self._parse_or_raise("describe_state", DescribeInput, payload)
        async with self._lock:
            self._work_this_run += 1
            out: ControlResult = await self._session.run_sql(
                ACT_DESCRIBE,
                ControlInput(ref=self._input.ref, include_data=req.include_data),
                ControlResult,
            )
            # The query answers from this cache: counters only, never the data (it would
            # go stale with the next turn, and the query cannot read SQL).
            self._stores = [without_data(s) for s in out.report.stores]
            return self._report(out.report)

    @workflow.signal(name="add_hint", description=SIGNAL_DESCRIPTIONS["add_hint"])
    async def add_hint(self, payload: RawValue = NO_INPUT) -> None:
        req = self._parse("add_hint", AddHintInput, payload)
        if req is None:
            return

        async def run() -> SessionReport:
            async with self._lock:
                out = await self._control(
                    ACT_ADD_HINT, ControlInput(ref=self._input.ref, hint=req.text)
                )
                self._cp.last_operation = "hint added"
                return self._report(out.report)

        await self._guarded("add_hint", run())

    @workflow.signal(name="migrate", description=SIGNAL_DESCRIPTIONS["migrate"])
    async def migrate(self, payload: RawValue = NO_INPUT) -> None:
        req = self._parse("migrate", MigrateInput, payload)
        if req is None:
            return
        self._migrate_to = req.task_queue or workflow.info().task_queue
        self._cp.last_operation = f"migrating to {self._migrate_to}"
        self._show()

    @workflow.signal(name="close", description=SIGNAL_DESCRIPTIONS["close"])
    async def close(self, payload: RawValue = NO_INPUT) -> None:
        req = self._parse("close", CloseInput, payload)
        if req is None:
            return
        self._close = req
        self._cp.last_operation = "closed by operator"

    # --- names the session does not handle ---------------------------------------------------

    @workflow.signal(dynamic=True, description=UNKNOWN_SIGNAL_DESCRIPTION)
    async def unknown_signal(self, name: str, payload: Sequence[RawValue]) -> None:
        """Without this handler the SDK would keep a misspelled signal (``Pause``) unread
        forever; it is recorded instead, with the valid names, in describe and the details."""
        self._record_rejection(
            name[:100], UnknownOperationError(unknown_operation_message("signal", name))
        )

    @workflow.update(dynamic=True, description=UNKNOWN_UPDATE_DESCRIPTION)
    async def unknown_update(self, name: str, payload: Sequence[RawValue]) -> None:
        raise refusal(UnknownOperationError.code, unknown_operation_message("update", name))

    @unknown_update.validator
    def _validate_unknown_update(self, name: str, payload: Sequence[RawValue]) -> None:
        # Refused before acceptance: the update leaves no history, and its sender the reason.
        record_rejection(workflow.metric_meter(), name[:100], UnknownOperationError.code)
        raise refusal(UnknownOperationError.code, unknown_operation_message("update", name))

    @workflow.query(name="describe", description=QUERY_DESCRIPTIONS["describe"])
    def describe(self, payload: RawValue = NO_INPUT) -> SessionReport:
        try:
            req: DescribeInput = self._parse_or_raise("describe", DescribeInput, payload)
        except ApplicationError as err:
            # A failed query reaches its caller as a message only, so the code leads it.
            raise refusal(err.type or "InvalidInput", f"{err.type}: {err.message}") from err
        return self._describe(req.include_data)

    def _describe(self, include_data: bool) -> SessionReport:
        report = StateOperationResult(
            operation="describe",
            session_id=self._input.session_id,
            namespace=self._input.namespace,
            stores=[s.model_copy() for s in self._stores] or stores_from_checkpoint(self._cp),
        )
        result = self._report(report)
        if include_data:
            # Queries cannot read SQL; the describe_state update returns the stored data.
            result.checkpoint = self._cp.model_copy(deep=True)
        else:
            result.checkpoint = self._cp.model_copy(update={"recent_turn_ids": []})
        return result

    # --- helpers -----------------------------------------------------------------------------

    def _parse_or_raise(self, operation: str, model: type[BaseModel], payload: Any) -> Any:
        try:
            return parse_request(operation, model, payload)
        except StatecoreError as err:
            # ``from None``: the typed message is the whole story; a chained cause would repeat
            # it (with pydantic's text) in every client's error output.
            raise refusal(err.code, err.message) from None

    async def _guarded(self, operation: str, work: Any) -> None:
        """Run a signal's work; a failure is recorded in the report, never fails the workflow."""
        try:
            await work
        except ApplicationError as err:
            self._record_rejection(operation, err)
        self._show()

    async def _control(self, activity: str, arg: ControlInput) -> ControlResult:
        await workflow.wait_condition(lambda: self._opened)
        self._work_this_run += 1
        out: ControlResult = await self._session.run_sql(activity, arg, ControlResult)
        self._stores = out.report.stores
        self._apply_snapshot(out.snapshot)
        self._last_activity = workflow.now()
        return out

    async def _reset(self, req: ResetInput) -> SessionReport:
        async with self._lock:
            # The activity reads an empty list as every store of the session.
            out = await self._control(
                ACT_RESET, ControlInput(ref=self._input.ref, stores=req.store_names or [])
            )
            self._cp.last_operation = f"reset {', '.join(req.stores) or 'all stores'}"
            if req.all or "conversation" in req.stores:
                self._cp.recent_turn_ids = []
            self._sync_search_attributes()
            return self._report(out.report)

    async def _compact(self, req: CompactInput, *, source: str) -> SessionReport:
        async with self._lock:
            return await self._run_compact(req, source)

    async def _run_compact(self, req: CompactInput, source: str) -> SessionReport:
        out = await self._control(
            ACT_COMPACT,
            ControlInput(
                ref=self._input.ref,
                compact=req,
                profile=self._input.profile,
                model=self._input.model,
            ),
        )
        if out.report.compacted:
            self._cp.compactions += 1
            self._cp.last_operation = f"compacted ({req.strategy}, {source})"
        else:
            self._cp.last_operation = f"compaction changed nothing ({req.strategy}, {source})"
        return self._report(out.report)

    def _apply_snapshot(self, snap: SessionSnapshot) -> None:
        cp = self._cp
        # Turn numbers never go backwards, even after a conversation reset.
        cp.turn = max(cp.turn, snap.turn)
        cp.take_counters(snap)
        cp.usage = snap.usage
        cp.active_step = snap.active_step
        if snap.budget is not None:
            cp.budget = snap.budget
        self._session.turn_number = cp.turn
        if snap.stores:
            self._stores = [StateStoreReport.model_validate(s) for s in snap.stores]

    def _report(self, base: StateOperationResult) -> SessionReport:
        return session_report(base, self._input, self._cp, self._rejections)

    def _sync_search_attributes(self, *, after_turn: bool = False) -> None:
        self._search_attributes.sync(self._input, self._cp, after_turn=after_turn)

    def _show(self) -> None:
        details = current_details(self._input, self._cp, self._answering, self._rejections)
        workflow.set_current_details(details)
