"""Committing a turn: every change a turn made, in one transaction, exactly once.

A turn's changes (its messages, KV writes, flow checkpoints, scoped-state document and
orchestration updates) arrive together and are applied inside the caller's transaction. The
turn record, inserted in the same transaction, is what makes the commit idempotent: a replayed
or retried commit finds the record and returns the stored result without writing anything, and
a concurrent duplicate loses the race with a revision conflict and rolls back whole. Turn
records live in the session's turn record store (``tx.turns``), so they survive
continue-as-new, travel in export bundles, go away with a conversation reset, and are deleted
with the session. The latest turn number stays a KV entry of the reserved ``turn.meta`` bucket.
"""

from __future__ import annotations

import base64
from typing import Any

from statecore.contract._activities import CommitTurnInput, CommitTurnResult, SessionSnapshot
from statecore.contract._session import LogCounters
from statecore.core._models import SessionInfo, SessionRef, StoredMessage, TokenUsage
from statecore.operations._change_records import turn_events
from statecore.operations._shares import apply_share_changes
from statecore.operations._turn_record import read_record, record_value
from statecore.store._base import StoreTransaction
from statecore.store._tool_and_task_buckets import validate_user_bucket

#: Reserved KV buckets of a session (never writable through the public KV surface). Turn
#: records were kept in ``turn`` before they had a store of their own; schema 1 bundles carry
#: them as entries of that bucket, which import into ``tx.turns``
#: (``statecore.operations._bundles``).
TURN_BUCKET = "turn"
TURN_META_BUCKET = "turn.meta"
_LATEST_KEY = "latest"


async def find_turn(tx: StoreTransaction, ref: SessionRef, turn_id: str) -> CommitTurnResult | None:
    """The committed result of ``turn_id``, or None if it never committed."""
    value = await tx.turns.get(ref, turn_id)
    if value is None:
        return None
    return await read_record(tx, ref, value)


async def latest_turn(tx: StoreTransaction, ref: SessionRef) -> int:
    entry = await tx.kv.get(ref.kv_scope, TURN_META_BUCKET, _LATEST_KEY)
    return int(entry.value["turn"]) if entry is not None else 0


async def commit_turn(
    tx: StoreTransaction, commit: CommitTurnInput, *, looked_up: bool = False
) -> CommitTurnResult:
    """Apply a turn inside ``tx``; returns the stored result if the turn already committed.

    ``looked_up``: the caller found no record of this turn in a transaction of its own just
    before (the model call's context read), so it is not looked up again here. A concurrent
    attempt that committed in between still cannot commit twice: inserting this turn's record
    then raises RevisionConflictError and the whole transaction rolls back."""
    ref = commit.ref
    if not looked_up:
        existing = await find_turn(tx, ref, commit.turn_id)
        if existing is not None:
            return existing

    # User KV writes may not touch reserved buckets (turn records, tool and task slots):
    # checked before anything is written, so a bad op leaves the whole turn uncommitted.
    for op in commit.kv:
        validate_user_bucket(op.bucket)
    await tx.begin_turn(ref, commit.turn_id, messages_only=_writes_only_messages(commit))
    stored: list[StoredMessage] = []
    if commit.messages:
        stored = await tx.conversation.append(ref, commit.turn_id, commit.messages)
    for op in commit.kv:
        value: Any = op.value
        if op.kind == "bytes":
            # Bytes cross the Temporal boundary as base64 text (see KVOp).
            value = base64.b64decode(str(op.value), validate=True)
        if op.op == "put":
            await tx.kv.put(
                ref.kv_scope,
                op.bucket,
                op.key,
                value,
                expected_revision=op.expected_revision,
                ttl_seconds=op.ttl_seconds,
            )
        else:
            await tx.kv.delete(
                ref.kv_scope, op.bucket, op.key, expected_revision=op.expected_revision
            )
    for fop in commit.flow:
        await tx.flow.save(ref, fop.flow_id, fop.step, fop.data)
    state_version = await _apply_state(tx, commit)
    await _apply_orchestration(tx, commit)
    await apply_share_changes(tx, ref, commit.shares)

    info = await tx.sessions.get(ref)
    assert info is not None  # ensured above, same transaction
    first_seq = stored[0].seq if stored else info.last_seq
    result = CommitTurnResult(
        turn=commit.turn,
        duplicate=False,
        first_seq=first_seq,
        **(await log_counters(tx, info)).model_dump(),
        state_version=state_version,
        result=commit.result,
    )
    # Last, the usage, the record, the latest-turn marker and the change feed (see
    # change_records). The record refuses a second commit of this turn with
    # RevisionConflictError: another attempt committed between our check and now, and the
    # caller must roll this transaction back and read that result instead.
    await tx.finish_turn(
        ref,
        commit.turn_id,
        record_value(result, stored),
        (TURN_META_BUCKET, _LATEST_KEY, {"turn": commit.turn}),
        turn_events(commit, stored, state_version),
        commit.usage,
    )
    return result


def _writes_only_messages(commit: CommitTurnInput) -> bool:
    """Whether the commit writes its messages (at least one) and nothing else before
    ``finish_turn``: a chat turn, which a backend may then send all at once."""
    op, shares = commit.orchestration, commit.shares
    return bool(commit.messages) and not (
        commit.kv
        or commit.flow
        or commit.state is not None
        or (op is not None and (op.set_active_step or op.used_tools or op.advance_sequence))
        or (shares is not None and not shares.empty())
    )


async def _apply_state(tx: StoreTransaction, commit: CommitTurnInput) -> int | None:
    if commit.state is None:
        return None
    ref = commit.ref
    current = await tx.state.get(ref.namespace, ref.session_id, ref.agent_id)
    if current is None:
        created = await tx.state.create(
            ref.namespace, ref.session_id, ref.agent_id, commit.state.state
        )
        return created.version
    updated = await tx.state.update(
        ref.namespace,
        ref.session_id,
        ref.agent_id,
        commit.state.state,
        expected_version=commit.state.expected_version,
    )
    return updated.version


async def _apply_orchestration(tx: StoreTransaction, commit: CommitTurnInput) -> None:
    """The turn's orchestration changes; its token usage is counted by ``finish_turn``."""
    ref, op = commit.ref, commit.orchestration
    if op is not None:
        if op.set_active_step:
            await tx.orchestration.set_active_step(ref, op.active_step)
        for tool in op.used_tools:
            await tx.orchestration.add_used_tool(ref, tool)
        for _ in range(op.advance_sequence):
            await tx.orchestration.advance_sequence(ref)


async def window_tokens(tx: StoreTransaction, info: SessionInfo) -> int:
    """Tokens from the window start to the end of the log, from stored running totals."""
    before = await tx.conversation.tokens_before(info.ref, info.window_start_seq)
    return 0 if before is None else info.token_total - before


async def log_counters(tx: StoreTransaction, info: SessionInfo) -> LogCounters:
    """The session's log counters as SQL holds them now."""
    return LogCounters(
        last_seq=info.last_seq,
        message_count=info.message_count,
        token_total=info.token_total,
        window_tokens=await window_tokens(tx, info),
    )


async def snapshot(tx: StoreTransaction, ref: SessionRef) -> SessionSnapshot:
    """Where the session stands in SQL: counters only, no log scan."""
    info = await tx.sessions.get(ref)
    if info is None:
        return SessionSnapshot()
    orch = await tx.orchestration.get(ref)
    return SessionSnapshot(
        turn=await latest_turn(tx, ref),
        **(await log_counters(tx, info)).model_dump(),
        usage=orch.cumulative_token_usage if orch else TokenUsage(),
        active_step=orch.active_step if orch else None,
    )
