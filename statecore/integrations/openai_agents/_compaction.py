"""The SDK's compaction, applied to statecore's log in one transaction that keeps the log.

``OpenAIResponsesCompactionSession`` replaces stored items with what ``responses.compact``
returned. On a backend that offers nothing more it clears the session and adds the compacted
items back: two writes, a window in which the session is empty, and the replaced items gone.
openai-agents 0.24.0 asks the wrapped session for two optional methods instead:

- ``_get_compaction_snapshot(limit)`` after a run (automatic compaction): the newest
  ``limit`` items, whether they are the whole history, and a ``replace_suffix(start, output)``
  that replaces items ``start..`` of that snapshot with ``output`` atomically, or returns
  False when the stored suffix has changed since the snapshot was read;
- ``_atomic_replace_items(output)`` for ``run_compaction()`` (manual): replace every item.

``StatecoreSession`` provides both. Each replacement is one statecore transaction: the
replaced items are *retracted* (readers no longer see them; the log keeps them, marked with
the time they were taken back, as ``pop_item`` does) and the compacted items are appended
after them. Nothing is deleted, and a concurrent writer sees the old items or the new ones,
never an empty session.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from agents.memory.session import _CompactionSnapshot

from statecore.core._errors import ConflictError
from statecore.core._limits import MAX_PAGE_SIZE
from statecore.core._models import SessionRef, StoredMessage
from statecore.integrations.openai_agents._items import items_to_messages, messages_to_items
from statecore.store import StateStore, StoreTransaction, run_transaction

if TYPE_CHECKING:
    from statecore.core._profile import SessionProfile


class StatecoreSession(Protocol):
    """What compaction needs of ``StatecoreSession`` (a Protocol, so the session and its
    compaction hooks do not import each other)."""

    ref: SessionRef
    profile: SessionProfile | None

    async def _store(self) -> StateStore: ...



async def read_snapshot(
    session: StatecoreSession,
    limit: int,
    prune_prefix: Callable[[Any], bool] | None = None,
) -> _CompactionSnapshot | None:
    """The snapshot the SDK's automatic compaction replaces a suffix of (module docstring).

    ``prune_prefix`` (the SDK's encrypted session passes it, to delete expired envelopes
    older than the suffix) is not applied: statecore retracts only the newest items, so
    expired envelopes stay in the log, where the encrypted session skips them on read."""
    if session.profile is not None:
        # get_items returns the assembled context, not the log: no suffix of it is stored.
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        return None
    store = await session._store()
    ref = session.ref

    async def read(tx: StoreTransaction) -> tuple[list[StoredMessage], bool]:
        return await _newest_visible(tx, ref, limit)

    stored, complete = await run_transaction(store, read, read_only=True)
    items = messages_to_items(stored)

    async def replace_suffix(start: int, output: list[Any]) -> bool:
        expected = stored[start:]
        if not expected:
            return False
        return await _replace(store, ref, expected, output)

    return _CompactionSnapshot(cast(list[Any], items), complete, replace_suffix)


async def replace_all(session: StatecoreSession, output: list[Any]) -> bool:
    """``run_compaction()``'s replacement of the whole history (module docstring). Returns
    False, so the SDK falls back to clear and add, for a session with a profile (its
    ``get_items`` is the assembled context, not the log)."""
    if session.profile is not None:
        return False
    messages = items_to_messages(output)
    store = await session._store()
    ref = session.ref
    turn_id = _compaction_turn_id()

    async def replace(tx: StoreTransaction) -> bool:
        await tx.sessions.ensure(ref)
        while await tx.conversation.retract_last(ref) is not None:
            pass
        if messages:
            await tx.conversation.append(ref, turn_id, messages)
        return True

    return await run_transaction(store, replace)


async def _replace(
    store: StateStore, ref: SessionRef, expected: list[StoredMessage], output: list[Any]
) -> bool:
    messages = items_to_messages(output)
    turn_id = _compaction_turn_id()

    async def replace(tx: StoreTransaction) -> bool:
        if await tx.sessions.get(ref) is None:
            return False  # cleared since the snapshot
        current, _ = await _newest_visible(tx, ref, len(expected))
        if [(m.seq, m.metadata) for m in current] != [(m.seq, m.metadata) for m in expected]:
            return False
        for want in reversed(expected):
            taken = await tx.conversation.retract_last(ref)
            if taken is None or taken.seq != want.seq:
                # Cannot happen after the check above within one transaction; refuse
                # rather than retract the wrong items.
                raise ConflictError(
                    f"the log changed while compaction replaced seq {want.seq}; nothing was changed"
                )
        if messages:
            await tx.conversation.append(ref, turn_id, messages)
        return True

    return await run_transaction(store, replace)


async def _newest_visible(
    tx: StoreTransaction, ref: SessionRef, limit: int
) -> tuple[list[StoredMessage], bool]:
    """The newest ``limit`` messages readers see, and whether they are all there are."""
    info = await tx.sessions.get(ref)
    if info is None:
        return [], True
    if info.window_start_seq == 1 and limit <= MAX_PAGE_SIZE:
        newest = await tx.conversation.tail(ref, max_messages=limit)
        if len(newest) < limit:
            return newest, True
        older = await tx.conversation.messages(ref, to_seq=newest[0].seq - 1, limit=1)
        return newest, not older
    every = await tx.conversation.messages(ref)
    return every[-limit:], len(every) <= limit


def _compaction_turn_id() -> str:
    # One fresh id per replacement, as add_items does: the compacted items are a write of
    # their own in the log.
    return f"compaction-{uuid.uuid4().hex}"
