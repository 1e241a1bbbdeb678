"""Turn activities: model calls with context from SQL, and the one-transaction turn commit."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import activity
from temporalio.common import RawValue

from statecore.activities._carried import decode_carried
from statecore.activities._failures import typed_errors
from statecore.activities._resources import WorkerResources, json_size
from statecore.activities._stream_writer import StreamWriter
from statecore.contract._activities import (
    ACT_COMMIT_TURN,
    ACT_GENERATE,
    ACT_READ_FLOW,
    ACT_READ_KV,
    ACT_READ_STATE,
    CommitTurnInput,
    CommitTurnResult,
    FlowOp,
    GenerateInput,
    GenerateResult,
    ModelOutcome,
    ReadFlowInput,
    ReadKVInput,
    ReadStateInput,
    ReadStateResult,
)
from statecore.core._errors import (
    ConflictError,
    ContentTooLargeError,
    InvalidInputError,
    ModelError,
    ModelUnavailableError,
    StatecoreError,
    StateTooLargeError,
)
from statecore.core._models import KVEntry, Message
from statecore.llm import ChatModel, ModelRequest, ModelResponse
from statecore.llm._base import TextDelta, ToolCallDelta, stream_reply
from statecore.observability._logs import log_with_input
from statecore.observability._metrics import record_turn
from statecore.operations._agent_turns import AgentTurnRequest, AgentTurnRunner
from statecore.operations._context_window import AssembledContext, assemble_context
from statecore.operations._turn_commit import commit_turn, find_turn
from statecore.store import StoreTransaction, run_transaction
from statecore.store._tool_and_task_buckets import validate_user_bucket

T = TypeVar("T")

log = logging.getLogger("statecore.turns")

#: Longest pause between liveness reports of a running model call.
MAX_HEARTBEAT_EVERY_SECONDS = 5.0


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await ``work`` while heartbeating, so a dead worker is noticed by the heartbeat
    timeout instead of the (much longer) start-to-close timeout.

    The heartbeats come from a timer beside the call rather than from a task around it:
    most calls (a fast model, the offline one) finish before the first heartbeat is due,
    and then cost one timer set and cancelled."""
    timeout = activity.info().heartbeat_timeout
    every = MAX_HEARTBEAT_EVERY_SECONDS
    if timeout:
        every = min(every, timeout.total_seconds() / 3)
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def beat() -> None:
        nonlocal timer
        # Armed again first: a heartbeat that raises must not end the heartbeats.
        timer = loop.call_later(every, beat)
        activity.heartbeat()  # runs in the activity's context, copied with the timer

    timer = loop.call_later(every, beat)
    try:
        return await work
    finally:
        if timer is not None:
            timer.cancel()


class TurnActivities:
    def __init__(self, resources: WorkerResources) -> None:
        self._r = resources

    @activity.defn(name=ACT_GENERATE)
    @typed_errors
    async def generate(self, payload: RawValue) -> GenerateResult:
        """Assemble the context from SQL plus the turn's pending messages, call the model,
        and, when ``input.commit`` is set, commit the whole turn in the same activity."""
        input = decode_carried(GenerateInput, payload)
        log_with_input(input)
        started = time.monotonic()
        store, counter = self._r.store, self._r.counter
        # A committing call carries its messages once, in the commit (earlier workflow code
        # sent them in ``pending`` as well: the same messages).
        pending = input.commit.messages if input.commit is not None else input.pending
        # A framework agent answers in place of the model; it reads the log itself.
        runner = self._r.agent_for(input.model, input.ref.agent_id)
        if runner is not None and input.commit is None:
            raise InvalidInputError(
                "a framework agent's turn commits what its run produced; call it as the "
                "turn's committing model call (turn.respond())"
            )
        model = self._r.model(input.model) if runner is None else None
        # A profile without max_tokens follows the model's window. Reported with the answer,
        # so the session's update validator refuses a message that can never fit.
        budget = self._r.turn_budget(model, input.profile) if model is not None else None

        async def read_context(
            tx: StoreTransaction,
        ) -> tuple[CommitTurnResult | None, AssembledContext | None]:
            # One read transaction: an already committed turn answers from its record (no
            # model call); otherwise the context is assembled from the same snapshot. None
            # for both: the session does not exist yet.
            if input.commit is not None:
                done = await find_turn(tx, input.ref, input.turn_id)
                if done is not None:
                    return done, None
            if await tx.sessions.get(input.ref) is None:
                return None, None
            if budget is None:  # a framework agent assembles its own context
                return None, _NOT_ASSEMBLED
            context = await assemble_context(
                tx,
                input.ref,
                pending,
                max_tokens=budget.max_tokens,
                counter=counter,
            )
            return None, context

        done, assembled = await run_transaction(store, read_context, read_only=True)
        if done is None and assembled is None:
            # A turn-API workflow may start its first turn without opening the session.
            await run_transaction(store, lambda tx: tx.sessions.ensure(input.ref))
            done, assembled = await run_transaction(store, read_context, read_only=True)
        if done is not None:
            if input.stream and activity.info().attempt > 1:
                # An earlier attempt committed and died before removing its stream row.
                await _remove_stream_row(self._r, input)
            return _duplicate(done)
        if assembled is None:
            # Deleted again between the two transactions: let Temporal retry the call.
            raise RuntimeError(f"session {input.ref} was deleted as its turn began")
        if runner is not None:
            assert input.commit is not None
            return await _run_agent_turn(self._r, runner, input, input.commit, started)
        assert model is not None  # no framework agent: the model answers
        context = assembled
        request = ModelRequest(
            messages=context.messages,
            model=input.model,
            tools=input.tools,
            prompt_tokens=context.tokens,
        )
        # Only the committing call streams: its row is removed by its own commit.
        writer = (
            _stream_writer(self._r, input) if input.commit is not None and input.stream else None
        )
        try:
            response: ModelResponse = await _heartbeating(_generate(model, request, writer))
        except BaseException as exc:
            # Whatever ended the call (a model error, the activity's cancellation), the writer
            # stops with it rather than outliving the attempt.
            if writer is not None:
                await writer.stop()
                if isinstance(exc, ModelError) and not isinstance(exc, ModelUnavailableError):
                    await writer.finish()  # no retry will replace this attempt's output
            raise
        if writer is not None:
            await writer.stop()
        reply = response.message
        out = GenerateResult(
            message=reply,
            usage=response.usage,
            context_tokens=context.tokens,
            finish_reason=response.finish_reason,
            budget=budget,
        )
        if input.commit is None:
            return out

        commit = input.commit.model_copy(
            update={
                "messages": [*input.commit.messages, reply],
                "usage": input.commit.usage + response.usage,
                "result": ModelOutcome(
                    reply=reply, usage=response.usage, context_tokens=context.tokens
                ),
            }
        )
        try:
            done = await _commit(self._r, commit, started, looked_up=True)
        finally:
            if writer is not None:
                await writer.finish()
        if done.duplicate:
            return _duplicate(done)
        out.commit = _without_outcome(done)
        return out

    @activity.defn(name=ACT_COMMIT_TURN)
    @typed_errors
    async def commit_turn(self, payload: RawValue) -> CommitTurnResult:
        input = decode_carried(CommitTurnInput, payload)
        log_with_input(input)
        return await _commit(self._r, input, time.monotonic())

    @activity.defn(name=ACT_READ_KV)
    @typed_errors
    async def read_kv(self, input: ReadKVInput) -> KVEntry | None:
        validate_user_bucket(input.bucket)
        entry = await run_transaction(
            self._r.store,
            lambda tx: tx.kv.get(input.ref.kv_scope, input.bucket, input.key),
            read_only=True,
        )
        if entry is not None and not self._r.large_values:
            size = len(entry.value) if entry.kind == "bytes" else json_size(entry.value)
            what = f"KV value {input.bucket}/{input.key}"
            self._r.check_inline(size, what, ContentTooLargeError)
        return entry

    @activity.defn(name=ACT_READ_FLOW)
    @typed_errors
    async def read_flow(self, input: ReadFlowInput) -> FlowOp | None:
        cp = await run_transaction(
            self._r.store, lambda tx: tx.flow.latest(input.ref, input.flow_id), read_only=True
        )
        if cp is None:
            return None
        if not self._r.large_values:
            what = f"flow {input.flow_id}'s checkpoint"
            self._r.check_inline(json_size(cp.data), what, StateTooLargeError)
        return FlowOp(flow_id=cp.flow_id, step=cp.step, data=cp.data)

    @activity.defn(name=ACT_READ_STATE)
    @typed_errors
    async def read_state(self, input: ReadStateInput) -> ReadStateResult:
        ref = input.ref
        found = await run_transaction(
            self._r.store,
            lambda tx: tx.state.get(ref.namespace, ref.session_id, ref.agent_id),
            read_only=True,
        )
        if found is None:
            return ReadStateResult()
        if not self._r.large_values:
            self._r.check_inline(json_size(found.state), "the scoped state", StateTooLargeError)
        return ReadStateResult(state=found.state, version=found.version)


async def _commit(
    resources: WorkerResources,
    commit: CommitTurnInput,
    started: float,
    *,
    looked_up: bool = False,
    also: Callable[[StoreTransaction], Awaitable[None]] | None = None,
) -> CommitTurnResult:
    """Commit a turn; a turn that really committed now (not a duplicate) is counted and
    logged once, here, whichever activity completed it.

    ``looked_up``: the caller has just found no record of the turn (see ``commit_turn``).
    ``also``: a framework store's own writes, in the same transaction (``AgentTurnOutcome``).
    A transaction that lost a deadlock runs again at once (``run_transaction``)."""
    store = resources.store

    async def work(tx: StoreTransaction) -> CommitTurnResult:
        done = await commit_turn(tx, commit, looked_up=looked_up)
        if also is not None and not done.duplicate:
            await also(tx)
        return done

    try:
        done = await run_transaction(store, work)
    except ConflictError:
        # A concurrent attempt of the same turn won (its record, or a revision or version
        # it advanced, refused our writes); its transaction committed, ours rolled back
        # whole. Return what it stored. Without such a record the conflict is the turn's own.
        stored = await run_transaction(
            store, lambda tx: find_turn(tx, commit.ref, commit.turn_id), read_only=True
        )
        if stored is None:
            raise
        return stored
    if not done.duplicate:
        record_turn(
            activity.metric_meter(), commit.usage, timedelta(seconds=time.monotonic() - started)
        )
        log.info(
            "turn %d committed: messages %d-%d, %d prompt + %d completion tokens",
            done.turn,
            done.first_seq,
            done.last_seq,
            commit.usage.prompt_tokens,
            commit.usage.completion_tokens,
        )
    return done


async def _generate(
    model: ChatModel, request: ModelRequest, writer: StreamWriter | None
) -> ModelResponse:
    """The model's response, its deltas handed to ``writer`` as they come."""
    response: ModelResponse | None = None
    async for item in stream_reply(model, request):
        if isinstance(item, TextDelta):
            if writer is not None:
                writer.add_text(item.text)
        elif isinstance(item, ToolCallDelta):
            if writer is not None:
                writer.add_call(item.call)
        else:
            response = item
    if response is None:
        raise ModelError(f"model {model.name!r} ended its stream without a response")
    return response


def _stream_writer(resources: WorkerResources, input: GenerateInput) -> StreamWriter | None:
    """A started writer of this attempt's output, or None when the store keeps no streams."""
    try:
        streams = resources.store.turn_streams
    except StatecoreError:
        return None
    writer = StreamWriter(
        streams,
        input.ref,
        input.turn_id,
        activity.info().attempt,
        resources.stream_flush_seconds,
    )
    writer.start()
    return writer


async def _remove_stream_row(resources: WorkerResources, input: GenerateInput) -> None:
    try:
        streams = resources.store.turn_streams
    except StatecoreError:
        return
    writer = StreamWriter(streams, input.ref, input.turn_id, activity.info().attempt, 0.0)
    await writer.finish()


#: read_context's answer for a turn a framework agent runs: the session exists, no context
#: was assembled (the agent reads the log through its own session view).
_NOT_ASSEMBLED = AssembledContext(messages=[], tokens=0, max_tokens=1)


async def _run_agent_turn(
    resources: WorkerResources,
    runner: AgentTurnRunner,
    input: GenerateInput,
    commit: CommitTurnInput,
    started: float,
) -> GenerateResult:
    """Run a framework agent for the turn and commit what it produced with the turn record.

    The run writes nothing itself; a run that raises leaves the session as it was. A runner
    that streams hands the reply's text to this attempt's stream writer as it comes."""
    writer = _stream_writer(resources, input) if input.stream else None
    try:
        outcome = await _heartbeating(
            runner.run_turn(
                AgentTurnRequest(
                    store=resources.store,
                    ref=input.ref,
                    turn_id=input.turn_id,
                    new_messages=list(commit.messages),
                    profile=input.profile,
                    counter=resources.counter,
                    on_text=writer.add_text if writer is not None else None,
                )
            )
        )
    except BaseException as exc:
        if writer is not None:
            await writer.stop()
            if isinstance(exc, StatecoreError) and not isinstance(exc, ModelUnavailableError):
                await writer.finish()  # refused for good: no retry replaces this output
        raise
    if writer is not None:
        await writer.stop()
    reply = outcome.reply
    full = commit.model_copy(
        update={
            # The run recorded the turn's new messages in its own form, first.
            "messages": outcome.messages,
            "usage": commit.usage + outcome.usage,
            "result": ModelOutcome(
                reply=reply, usage=outcome.usage, context_tokens=outcome.context_tokens
            ),
        }
    )
    try:
        done = await _commit(resources, full, started, looked_up=True, also=outcome.store_writes)
    finally:
        if writer is not None:
            await writer.finish()
    if done.duplicate:
        return _duplicate(done)
    return GenerateResult(
        message=reply,
        usage=outcome.usage,
        context_tokens=outcome.context_tokens,
        commit=_without_outcome(done),
    )


def _duplicate(done: CommitTurnResult) -> GenerateResult:
    """The stored outcome of an already committed turn, without calling the model again."""
    stored = done.result
    if stored is None:  # committed by turn.commit(), which calls no model
        return GenerateResult(
            message=Message(role="assistant", content=""), commit=_without_outcome(done)
        )
    reply = stored.reply
    return GenerateResult(
        message=Message(role="assistant", content=reply.content, tool_calls=reply.tool_calls),
        usage=stored.usage,
        context_tokens=stored.context_tokens,
        commit=_without_outcome(done),
    )


def _without_outcome(done: CommitTurnResult) -> CommitTurnResult:
    """The commit as a model call returns it: the stored outcome repeats the call's own
    result and would be written to history twice."""
    return done.model_copy(update={"result": None})
