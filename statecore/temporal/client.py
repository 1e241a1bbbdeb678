"""AgentSessionClient: how programs talk to sessions.

``send`` opens the session if needed (update-with-start) and runs one turn. It waits out the
moments a session cannot take a turn for reasons a retry fixes (a session moving to a new run,
more than 10 turns in flight), so callers never see Temporal's raw ResourceExhausted, and it
refuses payloads over the size limit before they reach the server (an oversized update is
admitted by the server and then fails the workflow task forever).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from statecore.contract.session import (
    DEFAULT_TASK_QUEUE,
    MAX_TURN_REQUEST_BYTES,
    WORKFLOW_TYPE,
    AddHintInput,
    CloseInput,
    CompactInput,
    DescribeInput,
    MigrateInput,
    PauseInput,
    ResetInput,
    SendMessageInput,
    SessionInput,
    SessionReport,
    TurnResult,
    workflow_id_for,
)
from statecore.core.errors import (
    ERRORS_BY_CODE,
    InvalidInputError,
    StatecoreError,
    error_from_code,
    first_problem,
    validation_message,
)
from statecore.core.models import SessionRef, validate_identifier, validate_key

#: Temporal's hard payload limit is 2 MiB; a turn request stays well below it (checked by
#: SendMessageInput itself, here and in the workflow's validator).
MAX_UPDATE_BYTES = MAX_TURN_REQUEST_BYTES

log = logging.getLogger("statecore.temporal.client")

_RETRYABLE_CODES = {"SessionDraining"}

M = TypeVar("M", bound=BaseModel)


def _request(request_type: type[M], /, **fields: Any) -> M:
    """Build a request model; a field it refuses is an InvalidInputError naming the field
    (the models' own statecore errors, such as UnknownStore, pass through as they are).
    Positional-only, so a request's own ``model`` field (SessionInput's) is a field here."""
    try:
        return request_type(**fields)
    except ValidationError as err:
        where = first_problem(err)[0] or request_type.__name__
        raise InvalidInputError(validation_message(err, what=where), field=where) from err


class AgentSessionClient:
    """Start, converse with and operate AgentSession workflows.

    Args:
        client: a connected Temporal client (with StatecorePlugin or the pydantic converter).
        task_queue: where new sessions run.
        namespace: statecore namespace (tenant) of the sessions this client opens.
        retry_for: how long ``send`` keeps retrying transient rejections before giving up.
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        namespace: str = "default",
        retry_for: timedelta = timedelta(minutes=2),
    ) -> None:
        self.client = client
        self.task_queue = validate_identifier(task_queue, "task_queue")
        self.namespace = validate_identifier(namespace, "namespace")
        self.retry_for = retry_for

    # --- sessions ------------------------------------------------------------------------------

    def session_input(self, agent_id: str, session_id: str, **options: Any) -> SessionInput:
        return _request(
            SessionInput,
            agent_id=agent_id,
            session_id=session_id,
            namespace=self.namespace,
            **options,
        )

    def handle(self, agent_id: str, session_id: str) -> WorkflowHandle[Any, Any]:
        validate_identifier(agent_id, "agent_id")
        validate_identifier(session_id, "session_id")
        return self.client.get_workflow_handle(self.workflow_id(agent_id, session_id))

    def workflow_id(self, agent_id: str, session_id: str) -> str:
        """The session's workflow id; it names the namespace unless it is the default one."""
        return workflow_id_for(agent_id, session_id, self.namespace)

    async def start(
        self, agent_id: str, session_id: str, **options: Any
    ) -> WorkflowHandle[Any, Any]:
        """Start the session's workflow, or return the running one."""
        inp = self.session_input(agent_id, session_id, **options)
        return await self.client.start_workflow(
            WORKFLOW_TYPE,
            inp,
            id=self.workflow_id(agent_id, session_id),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )

    async def send(
        self,
        agent_id: str,
        session_id: str,
        content: str,
        *,
        turn_id: str | None = None,
        role: str = "user",
        **session_options: Any,
    ) -> TurnResult:
        """Run one turn (opening or reopening the session), returning the model's reply.

        Pass the same ``turn_id`` to retry a turn safely: it commits once and returns the
        same result. Raises a typed StatecoreError (SessionPaused, ContentTooLarge, ...)."""
        turn_id = turn_id or uuid.uuid4().hex
        validate_key(turn_id)
        # SendMessageInput refuses what the workflow would refuse, size included, before
        # anything reaches the server.
        message = _request(SendMessageInput, turn_id=turn_id, content=content, role=role)
        session = self.session_input(agent_id, session_id, **session_options)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_for.total_seconds()
        delay = 0.05
        while True:
            # A with-start operation is single-use: build a new one per attempt.
            start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
                WORKFLOW_TYPE,
                session,
                id=self.workflow_id(agent_id, session_id),
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
            try:
                # Named by string (the workflow class is not imported here), so typed by hand.
                result: TurnResult = await self.client.execute_update_with_start_workflow(
                    "send_message",
                    message,
                    start_workflow_operation=start,
                    id=turn_id,
                    result_type=TurnResult,
                )
                return result
            except (
                WorkflowUpdateFailedError,
                RPCError,
                WorkflowUpdateRPCTimeoutOrCancelledError,
            ) as err:
                await _settle(start)
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # The SDK reports our own cancellation as an RPC timeout-or-cancel error;
                    # a cancelled send must stop, not retry.
                    raise asyncio.CancelledError from err
                if not _transient(err) or loop.time() + delay > deadline:
                    raise _typed(err) from err
                log.debug(
                    "turn %s of %s/%s refused for now (%s); sending again in %.2f s",
                    turn_id,
                    agent_id,
                    session_id,
                    _describe_refusal(err),
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    # --- operations --------------------------------------------------------------------------

    async def describe(
        self, agent_id: str, session_id: str, *, include_data: bool = False
    ) -> SessionReport:
        """The session's report from its workflow (a query: no history cost). With
        ``include_data`` the stored data is read from SQL through the describe_state update."""
        handle = self.handle(agent_id, session_id)
        if include_data:
            return await self._update(handle, "describe_state", DescribeInput(include_data=True))
        try:
            report: SessionReport = await handle.query(
                "describe", DescribeInput(), result_type=SessionReport
            )
            return report
        except (RPCError, WorkflowQueryFailedError) as err:
            raise _typed(err) from err

    async def reset(
        self, agent_id: str, session_id: str, stores: list[str] | None = None
    ) -> SessionReport:
        request = _request(ResetInput, stores=stores or [])
        return await self._update(self.handle(agent_id, session_id), "reset_state", request)

    async def compact(self, agent_id: str, session_id: str, **request: Any) -> SessionReport:
        compaction = _request(CompactInput, **request)
        return await self._update(self.handle(agent_id, session_id), "compact_state", compaction)

    async def pause(
        self, agent_id: str, session_id: str, reason: str = "paused by operator"
    ) -> None:
        await self._signal(agent_id, session_id, "pause", _request(PauseInput, reason=reason))

    async def resume(self, agent_id: str, session_id: str) -> None:
        await self._signal(agent_id, session_id, "resume", {})

    async def add_hint(self, agent_id: str, session_id: str, text: str) -> None:
        await self._signal(agent_id, session_id, "add_hint", _request(AddHintInput, text=text))

    async def migrate(self, agent_id: str, session_id: str, task_queue: str) -> None:
        await self._signal(
            agent_id, session_id, "migrate", _request(MigrateInput, task_queue=task_queue)
        )

    async def close(self, agent_id: str, session_id: str, *, delete_state: bool = False) -> None:
        await self._signal(
            agent_id, session_id, "close", _request(CloseInput, delete_state=delete_state)
        )

    async def status(self, agent_id: str, session_id: str) -> str:
        """The Temporal execution status of the session's latest run (RUNNING, COMPLETED...)."""
        desc = await self.handle(agent_id, session_id).describe()
        return WorkflowExecutionStatus.Name(desc.raw_description.workflow_execution_info.status)

    def ref(self, agent_id: str, session_id: str) -> SessionRef:
        return SessionRef(namespace=self.namespace, agent_id=agent_id, session_id=session_id)

    async def _signal(self, agent_id: str, session_id: str, name: str, arg: Any) -> None:
        try:
            await self.handle(agent_id, session_id).signal(name, arg)
        except RPCError as err:
            raise _typed(err) from err

    async def _update(self, handle: WorkflowHandle[Any, Any], name: str, arg: Any) -> SessionReport:
        try:
            report: SessionReport = await handle.execute_update(
                name, arg, result_type=SessionReport
            )
            return report
        except (WorkflowUpdateFailedError, RPCError) as err:
            raise _typed(err) from err


def _describe_refusal(err: Exception) -> str:
    """The error's class and message, and its cause's: what a retried send ran into."""
    text = f"{type(err).__name__}: {getattr(err, 'message', '') or err}"
    cause = getattr(err, "cause", None)
    if cause is not None:
        text += f" <- {type(cause).__name__}: {getattr(cause, 'message', '') or cause}"
    return text


def _transient(err: Exception) -> bool:
    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    if isinstance(err, RPCError):
        # Too many updates in flight (server limit 10), or the run is just continuing as new.
        return err.status in (
            RPCStatusCode.RESOURCE_EXHAUSTED,
            RPCStatusCode.NOT_FOUND,
            RPCStatusCode.UNAVAILABLE,
            RPCStatusCode.ABORTED,
        )
    cause = getattr(err, "cause", None)
    return isinstance(cause, ApplicationError) and cause.type in _RETRYABLE_CODES


def _typed(err: Exception) -> StatecoreError:
    """A Temporal failure as the statecore error its code names."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, ApplicationError):
        typed = error_from_code(cause.type, cause.message)
        return typed
    if isinstance(err, WorkflowQueryFailedError):
        # A failed query carries only its message; statecore's lead with their code.
        code, _, message = err.message.partition(": ")
        if code in ERRORS_BY_CODE:
            return error_from_code(code, message)
        return StatecoreError(f"the query failed: {err.message}")
    if isinstance(err, RPCError):
        if err.status == RPCStatusCode.NOT_FOUND:
            return error_from_code("SessionNotFound", f"no such session workflow: {err.message}")
        return StatecoreError(f"Temporal refused the request: {err.message}")
    return StatecoreError(str(err))


async def _settle(start: WithStartWorkflowOperation[Any, Any]) -> None:
    """Collect the start half's outcome of a failed update-with-start, so its exception is
    not reported later as never retrieved (the update's error is the one that matters)."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(start.workflow_handle(), timeout=0.01)
