"""Following one turn as its reply is generated: the loop behind ``AgentSessionClient.stream``.

The reader reads the turn's stream row (``statecore.store._turn_streams``) and, once the row
is gone (or at least every ``RECORD_CHECK_SECONDS`` while it stays), the turn's committed
record; it never talks to the worker that runs the turn, so it may run in any process that
reaches the database and Temporal. Between reads it waits on the store's signal: PostgreSQL's
NOTIFY, or the poll interval. The Temporal side is the turn's update: its result is the final
event's ``TurnResult``, its failure is the stream's, and for a reader that names a turn id
alone, an update Temporal does not know (with no row and no record either) is TurnNotFound.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio.service import RPCError, RPCStatusCode

from statecore.contract._activities import CommitTurnResult
from statecore.contract._session import ReplyMessage, TurnResult
from statecore.contract._streams import StreamCursor, StreamPosition, TurnEvent
from statecore.core._errors import StatecoreError, TurnNotFoundError
from statecore.core._models import Message, SessionRef, TokenUsage, ToolCall
from statecore.operations._turn_commit import find_turn
from statecore.store import StateStore, run_transaction

#: While a stream row stays, the committed record is read at least this often: a worker that
#: died between the turn's commit and the row's removal leaves the row until the retried
#: call removes it, and the reader should not wait for that.
RECORD_CHECK_SECONDS = 1.0


async def follow_turn(
    store: StateStore,
    ref: SessionRef,
    turn_id: str,
    update: asyncio.Future[TurnResult] | None,
    *,
    position: StreamPosition | None,
    poll_interval: float,
    follow_for: float,
    verify: bool,
) -> AsyncIterator[TurnEvent]:
    """Events of ``turn_id`` from ``position`` until its final one.

    ``update``: the turn's update result (sent by this reader, or a handle on the running
    one). ``verify``: the caller named the turn by id only; an update Temporal does not know,
    with neither row nor record, is TurnNotFoundError."""
    streams = store.turn_streams
    cursor = StreamCursor(turn_id, position)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + follow_for
    checked_record = loop.time()
    seen = False
    async with streams.changes(ref, turn_id, poll_interval=poll_interval) as signal:
        while True:
            signal.arm()
            row = await streams.read(ref, turn_id)
            if row is not None:
                seen = True
                for event in cursor.on_row(row.attempt, row.text, row.tool_calls):
                    yield event  # type: ignore[misc]
            now = loop.time()
            answered = update is not None and update.done()
            if row is None or answered or now - checked_record >= RECORD_CHECK_SECONDS:
                checked_record = now
                committed = await run_transaction(
                    store, lambda tx: find_turn(tx, ref, turn_id), read_only=True
                )
                if committed is not None:
                    # The rest of the text at once; the result may take the update's answer.
                    for event in cursor.on_committed_text(_committed_reply(committed)):
                        yield event  # type: ignore[misc]
                    yield cursor.final(await _outcome(committed, update, turn_id))
                    return
            if update is not None and update.done():
                error = update.exception()
                if error is None:
                    # The update answered but its record was not read yet (a read that
                    # raced the commit): read again at once.
                    if row is None:
                        result = update.result()
                        reply = _reply_message(result)
                        for event in cursor.on_commit(reply, result):
                            yield event  # type: ignore[misc]
                        return
                elif _unknown_update(error):
                    if verify and not seen:
                        raise TurnNotFoundError(
                            f"turn {turn_id!r} is neither running nor committed in session "
                            f"{ref.agent_id}/{ref.session_id}",
                            turn_id=turn_id,
                        ) from error
                    update = None  # e.g. committed in an earlier run: read on
                else:
                    raise error
            left = deadline - loop.time()
            if left <= 0:
                raise StatecoreError(
                    f"turn {turn_id!r} did not finish within {follow_for:.0f}s of following it; "
                    "follow it again with its turn id and the last position"
                )
            await signal.wait(min(left, poll_interval) if row is None else left)


def _unknown_update(error: BaseException) -> bool:
    return isinstance(error, RPCError) and error.status == RPCStatusCode.NOT_FOUND


def _reply_message(result: TurnResult) -> Message:
    return Message(
        role="assistant",
        content=result.reply.content,
        tool_calls=[ToolCall.model_validate(c) for c in result.reply.tool_calls],
    )


def _committed_reply(committed: CommitTurnResult) -> Message:
    outcome = committed.result
    return outcome.reply if outcome is not None else Message(role="assistant", content="")


async def _outcome(
    committed: CommitTurnResult, update: asyncio.Future[TurnResult] | None, turn_id: str
) -> TurnResult:
    """The turn's result: the update's when it has one (within a short wait: it answers
    right after the commit), else built from the record."""
    if update is not None and not update.done():
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(update), UPDATE_ANSWER_WAIT_SECONDS)
    if update is not None and update.done() and update.exception() is None:
        return update.result()
    outcome = committed.result
    reply = _committed_reply(committed)
    return TurnResult(
        turn=committed.turn,
        turn_id=turn_id,
        reply=ReplyMessage(
            content=reply.content, tool_calls=[c.model_dump() for c in reply.tool_calls]
        ),
        usage=outcome.usage if outcome is not None else TokenUsage(),
        first_seq=committed.first_seq,
        last_seq=committed.last_seq,
        context_tokens=outcome.context_tokens if outcome is not None else 0,
        duplicate=False,
    )


#: How long a reader that found the turn committed waits for its update's answer (the
#: workflow answers right after the commit) before building the result from the record.
UPDATE_ANSWER_WAIT_SECONDS = 5.0
