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
import warnings
from collections.abc import AsyncIterator, Callable
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
from temporalio.common import RawValue, WorkflowIDConflictPolicy
from temporalio.converter import PayloadConverter, WorkflowSerializationContext
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from statecore.contract._session import (
    DEFAULT_TASK_QUEUE,
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
    check_turn_request_size,
    session_details,
    session_summary,
    workflow_id_for,
)
from statecore.contract._streams import StreamPosition, TurnEvent
from statecore.core._errors import (
    InvalidInputError,
    InvalidLimitError,
    PayloadTooLargeError,
    StatecoreError,
    TemporalRequestError,
    UnknownAgentError,
    error_from_code,
    first_problem,
    validation_message,
)
from statecore.core._limits import (
    DEFAULT_PAYLOAD_LIMIT_BYTES,
    DEFAULT_STREAM_POLL_SECONDS,
    DEFAULT_STREAM_READ_SECONDS,
    GRPC_MESSAGE_LIMIT_BYTES,
    MAX_STREAM_POLL_SECONDS,
    MAX_TURN_REQUEST_BYTES,
    MIN_PAYLOAD_LIMIT_BYTES,
    MIN_STREAM_POLL_SECONDS,
)
from statecore.core._model_windows import context_budget
from statecore.core._models import SessionRef, validate_identifier, validate_turn_id
from statecore.core._profile import SessionProfile, check_limit
from statecore.errors import from_failure
from statecore.store._base import StateStore
from statecore.temporal._exit_guard import release_native_clients_at_exit
from statecore.temporal._queue_check import SessionQueueWarning, queue_mismatch_message
from statecore.temporal._turn_stream import follow_turn
from statecore.temporal._turn_wait import waiting_on

#: Temporal's hard payload limit is 2 MiB; a turn request stays well below it (checked by
#: SendMessageInput itself, here and in the workflow's validator).
MAX_UPDATE_BYTES = MAX_TURN_REQUEST_BYTES
#: How to send what is too large, in every refusal.
LARGE_DATA_ADVICE = (
    "send large data by reference: write it to KV or scoped state (or another store, as a "
    "claim check) and send its key"
)

#: How long ``send`` waits for a session its refused first turn opened to end.
SESSION_END_WAIT_SECONDS = 10.0

log = logging.getLogger("statecore.temporal._client")

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
        payload_limit_bytes: the server's payload size limit (Temporal's default, 2 MiB):
            a request over it, as encoded by the client's data converter and codec, is
            refused with PayloadTooLarge before it is sent.
        context_window: the context window (tokens) of the model the workers answer with,
            if known. With it, or with ``profile.max_tokens`` in ``send``'s options, a message
            that can never fit the session's context budget is refused before it is sent
            (ContextBudgetExceeded, naming the budget) instead of after the turn started.
        store: the workers' database (``open_store(url)``), which ``stream`` reads a turn's
            reply from as it is generated; ``stream(store=...)`` may name it instead.
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        namespace: str = "default",
        retry_for: timedelta = timedelta(minutes=2),
        payload_limit_bytes: int = DEFAULT_PAYLOAD_LIMIT_BYTES,
        context_window: int | None = None,
        store: StateStore | None = None,
    ) -> None:
        release_native_clients_at_exit()  # see statecore.temporal._exit_guard
        #: Sessions whose task queue ``send`` has compared with this client's.
        self._queues_checked: set[tuple[str, str]] = set()
        self.client = client
        self.task_queue = validate_identifier(task_queue, "task_queue")
        self.namespace = validate_identifier(namespace, "namespace")
        self.retry_for = retry_for
        if (
            isinstance(payload_limit_bytes, bool)
            or not isinstance(payload_limit_bytes, int)
            or not MIN_PAYLOAD_LIMIT_BYTES <= payload_limit_bytes <= GRPC_MESSAGE_LIMIT_BYTES
        ):
            raise InvalidLimitError(
                f"payload_limit_bytes is {payload_limit_bytes!r}; use a whole number from "
                f"{MIN_PAYLOAD_LIMIT_BYTES} to {GRPC_MESSAGE_LIMIT_BYTES} (the server's "
                "payload limit, 2 MiB unless it was configured otherwise)"
            )
        self.payload_limit_bytes = payload_limit_bytes
        self.context_window = (
            None if context_window is None else check_limit(context_window, "context_window")
        )
        #: The sessions' database, which ``stream`` reads replies from as they are generated.
        self.store = store
        #: Sends of turns whose reader left before the end (see ``stream``).
        self._detached: set[asyncio.Future[TurnResult]] = set()

    def check_fits_budget(self, message: SendMessageInput, profile: SessionProfile) -> None:
        """Raise ContextBudgetError if ``message`` alone (with the reply's priming) is over
        the session's context budget, when this client knows that budget: such a turn could
        never run, whatever the session's history."""
        if profile.max_tokens is None and self.context_window is None:
            return
        budget = context_budget(profile.max_tokens, self.context_window)
        from statecore.core._message_fit import check_message_fits  # tiktoken: only when needed

        check_message_fits(message.to_message(), budget)

    def _converter(self, workflow_id: str) -> PayloadConverter:
        """The payload converter this client encodes a session's inputs with, given the
        context the SDK would give it."""
        context = WorkflowSerializationContext(
            namespace=self.client.namespace, workflow_id=workflow_id
        )
        return self.client.data_converter.with_context(context).payload_converter

    async def check_payloads(self, what: str, *values: Any) -> None:
        """Raise PayloadTooLargeError if ``values``, encoded as this client sends them (data
        converter and codec), hold a payload over the limit or do not fit one gRPC message.

        The server admits an update or a start up to its limit and the worker then fails the
        workflow task that would carry it; several updates near the limit fail together as
        gRPC's "message too large". Refused here, nothing reaches the session."""
        payloads = await self.client.data_converter.encode(list(values))
        sizes = [payload.ByteSize() for payload in payloads]
        largest = max(sizes, default=0)
        if largest > self.payload_limit_bytes:
            raise PayloadTooLargeError(
                f"the {what} request is {largest} bytes as a Temporal payload; the limit is "
                f"{self.payload_limit_bytes}: {LARGE_DATA_ADVICE}",
                size=largest,
                limit=self.payload_limit_bytes,
            )
        if sum(sizes) > GRPC_MESSAGE_LIMIT_BYTES:
            raise PayloadTooLargeError(
                f"the {what} request is {sum(sizes)} bytes in all; one request may carry at "
                f"most {GRPC_MESSAGE_LIMIT_BYTES}: {LARGE_DATA_ADVICE}",
                size=sum(sizes),
                limit=GRPC_MESSAGE_LIMIT_BYTES,
            )

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
        await self.check_payloads("start", inp)
        return await self.client.start_workflow(
            WORKFLOW_TYPE,
            inp,
            id=self.workflow_id(agent_id, session_id),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=session_summary(agent_id, session_id),
            static_details=session_details(agent_id, session_id, self.namespace),
        )

    async def send(
        self,
        agent_id: str,
        session_id: str,
        content: str,
        *,
        turn_id: str | None = None,
        role: str = "user",
        on_retry: Callable[[str, float], None] | None = None,
        stream: bool = False,
        **session_options: Any,
    ) -> TurnResult:
        """Run one turn (opening or reopening the session), returning the model's reply.

        Pass the same ``turn_id`` to retry a turn safely: it commits once and returns the
        same result. Raises a typed StatecoreError (SessionPaused, ContentTooLarge, ...).
        ``on_retry(reason, seconds_left)`` is told each time a transient refusal (Temporal
        restarting, the session moving to a new run) is about to be retried. ``stream``:
        the worker publishes the reply's text while it is generated, for readers of
        ``stream(..., turn_id=...)`` in any process (``stream()`` sets it itself); without
        it the turn writes no stream rows."""
        turn_id = turn_id or uuid.uuid4().hex
        # SendMessageInput refuses what the workflow would refuse (the turn id, the text, the
        # size) before anything reaches the server.
        message = _request(
            SendMessageInput, turn_id=turn_id, content=content, role=role, stream=stream
        )
        session = self.session_input(agent_id, session_id, **session_options)
        # Encoded once: the request's size is checked on the payloads that are then sent (a
        # RawValue passes through the converter as it is; the codec, if any, still applies).
        workflow_id = self.workflow_id(agent_id, session_id)
        session_payload, message_payload = self._converter(workflow_id).to_payloads(
            [session, message]
        )
        check_turn_request_size(message, len(message_payload.data))
        start_arg, update_arg = RawValue(session_payload), RawValue(message_payload)
        await self.check_payloads("send_message", start_arg, update_arg)
        self.check_fits_budget(message, session.profile)
        # What the Web UI shows for the session, should this send start its workflow.
        summary = session_summary(agent_id, session_id)
        details = session_details(agent_id, session_id, self.namespace)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_for.total_seconds()
        delay = 0.05
        while True:
            # A with-start operation is single-use: build a new one per attempt.
            start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
                WORKFLOW_TYPE,
                start_arg,
                id=workflow_id,
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=summary,
                static_details=details,
            )
            try:
                # Named by string (the workflow class is not imported here), so typed by hand.
                result: TurnResult = await self.client.execute_update_with_start_workflow(
                    "send_message",
                    update_arg,
                    start_workflow_operation=start,
                    id=turn_id,
                    result_type=TurnResult,
                )
                await self._check_queue_once(agent_id, session_id)
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
                    typed = _typed(err)
                    if isinstance(typed, UnknownAgentError):
                        await self._await_session_end(agent_id, session_id)
                    raise typed from err
                log.debug(
                    "turn %s of %s/%s refused for now (%s); sending again in %.2f s",
                    turn_id,
                    agent_id,
                    session_id,
                    _describe_refusal(err),
                    delay,
                )
                if on_retry is not None:
                    reason = _refusal_reason(err)
                    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
                        # Accepted, not answered yet: say what the turn is waiting on.
                        reason = await self.waiting_on(agent_id, session_id) or reason
                    on_retry(reason, deadline - loop.time())
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def stream(
        self,
        agent_id: str,
        session_id: str,
        content: str | None = None,
        *,
        turn_id: str | None = None,
        position: StreamPosition | str | None = None,
        store: StateStore | None = None,
        poll_interval: float = DEFAULT_STREAM_POLL_SECONDS,
        follow_for: float = DEFAULT_STREAM_READ_SECONDS,
        role: str = "user",
        **session_options: Any,
    ) -> AsyncIterator[TurnEvent]:
        """Run one turn as ``send`` does, yielding its reply as it is generated: ``text``
        deltas, ``tool_call``s, ``restarted`` when a retry replaced the attempt being read,
        then ``final`` with the ``TurnResult`` (see ``statecore.contract._streams``).

        Without ``content``, follow the running (or committed) turn ``turn_id`` instead,
        from ``position`` (the last event's, to resume after a disconnect): an id that is
        neither running nor committed in this session raises TurnNotFoundError.

        The deltas are read from the database (``store``, else the client's own), never
        from the worker, every ``poll_interval`` seconds (SQLite, MariaDB) or when
        PostgreSQL notifies; leaving the loop early does not affect the turn. A turn still
        running after ``follow_for`` seconds raises StatecoreError (follow it again)."""
        reader_store = store or self.store
        if reader_store is None:
            raise InvalidInputError(
                "stream() reads the reply from the sessions' database: pass store= (an "
                "open_store() of the workers' database) here or to AgentSessionClient",
                field="store",
            )
        poll = _check_seconds(poll_interval, "poll_interval", MIN_STREAM_POLL_SECONDS)
        limit = _check_seconds(follow_for, "follow_for", MIN_STREAM_POLL_SECONDS, maximum=None)
        at = StreamPosition.parse(position) if isinstance(position, str) else position
        ref = self.ref(agent_id, session_id)
        if content is None:
            if turn_id is None:
                raise InvalidInputError(
                    "stream() needs the message to send, or the turn_id of a turn to follow",
                    field="turn_id",
                )
            validate_turn_id(turn_id)
            update = asyncio.ensure_future(self._turn_result(agent_id, session_id, turn_id))
        else:
            turn_id = turn_id or uuid.uuid4().hex
            validate_turn_id(turn_id)
            update = asyncio.ensure_future(
                self.send(
                    agent_id,
                    session_id,
                    content,
                    turn_id=turn_id,
                    role=role,
                    stream=True,
                    **session_options,
                )
            )
        try:
            async for event in follow_turn(
                reader_store,
                ref,
                turn_id,
                update,
                position=at,
                poll_interval=poll,
                follow_for=limit,
                verify=content is None,
            ):
                yield event
        finally:
            if content is None:
                update.cancel()  # only a watch on the turn: the turn goes on without it
                with contextlib.suppress(BaseException):
                    await update
            elif not update.done():
                # The reader left early: the turn it sent must not depend on it, so its send
                # runs to its end (within retry_for) on its own.
                self._detached.add(update)
                update.add_done_callback(_forget_detached(self._detached))

    async def _turn_result(self, agent_id: str, session_id: str, turn_id: str) -> TurnResult:
        """The result of the session's turn ``turn_id`` (its update), once it has one. An
        update Temporal does not know stays a NOT_FOUND RPCError (the reader decides)."""
        handle = self.handle(agent_id, session_id).get_update_handle(
            turn_id, result_type=TurnResult
        )
        try:
            result: TurnResult = await handle.result()
            return result
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise
            raise _typed(err) from err
        except WorkflowUpdateFailedError as err:
            raise _typed(err) from err

    async def _check_queue_once(self, agent_id: str, session_id: str) -> None:
        """Warn, once per session and client, when the session runs on another task queue
        than this client's: a session stays on the queue it opened on, so its turns are
        answered by that queue's workers (their models, their database), not this one's."""
        key = (agent_id, session_id)
        if key in self._queues_checked:
            return
        self._queues_checked.add(key)
        with contextlib.suppress(RPCError):
            running_on = (await self.handle(agent_id, session_id).describe()).task_queue
            if running_on != self.task_queue:
                text = queue_mismatch_message(
                    f"{agent_id}/{session_id}", running_on, self.task_queue
                )
                log.warning("%s", text)
                warnings.warn(text, SessionQueueWarning, stacklevel=3)

    async def waiting_on(self, agent_id: str, session_id: str) -> str | None:
        """What the session's unanswered turn waits on, if its model call's latest attempt
        failed: the attempt, its typed failure and when the next attempt starts (from
        Temporal's record of the pending call); None if nothing failed."""
        return await waiting_on(self.handle(agent_id, session_id))

    async def _await_session_end(self, agent_id: str, session_id: str) -> None:
        """A session that its refused first turn opened ends with the refusal (a model no
        worker has would refuse every later turn too): wait for that run to finish, at most
        SESSION_END_WAIT_SECONDS, so the next send opens a new run instead of being told the
        session is closing. A session that stays open is left at once."""
        handle = self.handle(agent_id, session_id)
        with contextlib.suppress(RPCError, WorkflowQueryFailedError, TimeoutError):
            report: SessionReport = await handle.query(
                "describe", DescribeInput(), result_type=SessionReport
            )
            if report.checkpoint.status == "closed":
                await asyncio.wait_for(handle.result(), SESSION_END_WAIT_SECONDS)

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
        self,
        agent_id: str,
        session_id: str,
        stores: list[str] | None = None,
        *,
        all_stores: bool = False,
    ) -> SessionReport:
        """Clear the named ``stores`` of the session, or every store with ``all_stores=True``.
        A reset names what it clears: neither (or both) raises ResetRefusedError before
        anything is sent."""
        fields: dict[str, Any] = {"all": all_stores}
        if stores is not None:
            fields["stores"] = stores
        request = _request(ResetInput, **fields)
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
        await self.check_payloads(name, arg)
        try:
            await self.handle(agent_id, session_id).signal(name, arg)
        except RPCError as err:
            raise _typed(err) from err

    async def _update(self, handle: WorkflowHandle[Any, Any], name: str, arg: Any) -> SessionReport:
        await self.check_payloads(name, arg)
        try:
            report: SessionReport = await handle.execute_update(
                name, arg, result_type=SessionReport
            )
            return report
        except (WorkflowUpdateFailedError, RPCError) as err:
            raise _typed(err) from err


def _forget_detached(
    detached: set[asyncio.Future[TurnResult]],
) -> Callable[[asyncio.Future[TurnResult]], None]:
    def forget(done: asyncio.Future[TurnResult]) -> None:
        detached.discard(done)
        if not done.cancelled() and done.exception() is not None:
            log.info("a streamed turn whose reader left failed: %s", done.exception())

    return forget


def _check_seconds(
    value: Any, what: str, minimum: float, maximum: float | None = MAX_STREAM_POLL_SECONDS
) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value != value
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        most = f" to {maximum}" if maximum is not None else " or more"
        raise InvalidLimitError(f"{what} is {value!r}; use {minimum}{most} seconds", field=what)
    return float(value)


def _describe_refusal(err: Exception) -> str:
    """The error's class and message, and its cause's: what a retried send ran into."""
    text = f"{type(err).__name__}: {getattr(err, 'message', '') or err}"
    cause = getattr(err, "cause", None)
    if cause is not None:
        text += f" <- {type(cause).__name__}: {getattr(cause, 'message', '') or cause}"
    return text


def _refusal_reason(err: Exception) -> str:
    """What a retried send is waiting out, in a few words for a person."""
    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
        return "no answer yet"
    if isinstance(err, RPCError):
        if _transport_failure(err) or err.status == RPCStatusCode.UNAVAILABLE:
            return "Temporal is unreachable"
        if err.status == RPCStatusCode.RESOURCE_EXHAUSTED:
            return "the session is busy"
        return "the session is moving to a new run"
    return "the session is moving to a new run"


def _transport_failure(err: RPCError) -> bool:
    """The connection broke under the call (a server restarting): the server may or may not
    have the update, and a retry with the same turn id finds out."""
    return err.status in (
        RPCStatusCode.UNKNOWN,
        RPCStatusCode.CANCELLED,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.INTERNAL,
    ) and any(word in err.message.lower() for word in ("transport", "connection", "stream"))


def _transient(err: Exception) -> bool:
    if isinstance(err, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    if isinstance(err, RPCError):
        if _too_large(err):
            return False
        if _WORKFLOW_TASK_FAILING in err.message:
            # The session's workflow task is failing, e.g. on an update over the payload limit
            # sent around this client (`temporal workflow update`): Temporal recovers once it
            # drops that request, and the turn can go through then.
            return True
        # Too many updates in flight (server limit 10), the run just continuing as new, or
        # Temporal restarting (refused, or the connection broken under the call).
        return err.status in (
            RPCStatusCode.RESOURCE_EXHAUSTED,
            RPCStatusCode.NOT_FOUND,
            RPCStatusCode.UNAVAILABLE,
            RPCStatusCode.ABORTED,
        ) or _transport_failure(err)
    cause = getattr(err, "cause", None)
    return isinstance(cause, ApplicationError) and cause.type in _RETRYABLE_CODES


#: How gRPC and the server word a request over a size limit (gRPC's own check says "message
#: larger than max" or "Message too large"; the server's blob check names its limit).
_TOO_LARGE_WORDS = ("larger than max", "message too large", "size limit", "blobsizelimit")


_WORKFLOW_TASK_FAILING = "Workflow Task in failed state"


def _too_large(err: RPCError) -> bool:
    text = err.message.lower()
    return any(words in text for words in _TOO_LARGE_WORDS)


def _typed(err: Exception) -> StatecoreError:
    """A Temporal failure as the statecore error its code names; one statecore does not know
    becomes TemporalRequestFailed (always a code, never bare gRPC text)."""
    cause = getattr(err, "cause", None)
    typed = from_failure(err)  # an ApplicationError with a statecore code, or a query's
    if typed is not None:
        return typed
    if isinstance(err, WorkflowQueryFailedError):
        return TemporalRequestError(f"the query failed: {err.message}")
    if isinstance(err, RPCError):
        if _too_large(err):
            return PayloadTooLargeError(
                f"Temporal refused the request as too large ({err.message}): {LARGE_DATA_ADVICE}"
            )
        if err.status == RPCStatusCode.NOT_FOUND:
            return error_from_code("SessionNotFound", f"no such session workflow: {err.message}")
        return TemporalRequestError(f"Temporal refused the request: {err.message}")
    if cause is not None:
        kind = getattr(cause, "type", None) or type(cause).__name__
        message = getattr(cause, "message", "") or str(cause)
        return TemporalRequestError(f"the request failed ({kind}): {message}", cause=kind)
    return TemporalRequestError(str(err))


async def _settle(start: WithStartWorkflowOperation[Any, Any]) -> None:
    """Collect the start half's outcome of a failed update-with-start, so its exception is
    not reported later as never retrieved (the update's error is the one that matters)."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(start.workflow_handle(), timeout=0.01)
