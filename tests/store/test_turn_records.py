"""Conformance: turn records (TurnRecordStore) on every backend."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from statecore.core._errors import (
    InvalidIdentifierError,
    RevisionConflictError,
    SessionNotFoundError,
)
from statecore.core._models import Hint, SessionRef
from statecore.store import StateStore
from tests.store.helpers import ensure

CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


async def test_insert_get_count_and_list(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.turns.insert(ref, "t-2", [2, 4, 1])
        await tx.turns.insert(ref, "t-1", {"turn": 1, "result": {"reply_seq": 2}})
    async with store.transaction() as tx:
        assert await tx.turns.get(ref, "t-2") == [2, 4, 1]
        assert await tx.turns.get(ref, "t-1") == {"turn": 1, "result": {"reply_seq": 2}}
        assert await tx.turns.get(ref, "t-3") is None
        assert await tx.turns.count(ref) == 2
        assert await tx.turns.records(ref) == [
            ("t-1", {"turn": 1, "result": {"reply_seq": 2}}),
            ("t-2", [2, 4, 1]),
        ]


async def test_a_turn_has_one_record(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.turns.insert(ref, "t-1", [1])
    with pytest.raises(RevisionConflictError):
        async with store.transaction() as tx:
            await tx.turns.insert(ref, "t-2", [2])
            await tx.turns.insert(ref, "t-1", [9])
    async with store.transaction() as tx:
        # The conflict rolled its whole transaction back.
        assert await tx.turns.records(ref) == [("t-1", [1])]


async def test_records_of_a_missing_session(
    store: StateStore, make_ref: Callable[..., SessionRef]
) -> None:
    ghost = make_ref("ghost")
    async with store.transaction() as tx:
        assert await tx.turns.get(ghost, "t-1") is None
        assert await tx.turns.count(ghost) == 0
        assert await tx.turns.records(ghost) == []
        assert await tx.turns.clear(ghost) == 0
    with pytest.raises(SessionNotFoundError):
        async with store.transaction() as tx:
            await tx.turns.insert(ghost, "t-1", [1])


async def test_records_belong_to_their_session(
    store: StateStore, make_ref: Callable[..., SessionRef]
) -> None:
    mine, other = make_ref("mine"), make_ref("other")
    await ensure(store, mine, other)
    async with store.transaction() as tx:
        await tx.turns.insert(mine, "t-1", [1])
        await tx.turns.insert(other, "t-1", [5])
    async with store.transaction() as tx:
        assert await tx.turns.clear(mine) == 1
    async with store.transaction() as tx:
        assert await tx.turns.get(mine, "t-1") is None
        assert await tx.turns.get(other, "t-1") == [5]
        assert await tx.sessions.delete(other)
    async with store.transaction() as tx:
        await tx.sessions.ensure(other)
        # A session made again under the same name starts without the old records.
        assert await tx.turns.count(other) == 0


async def test_restore_writes_records_verbatim(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.turns.insert(ref, "t-1", [1])
        await tx.turns.restore(ref, [("t-1", {"turn": 1}), ("t-2", [2]), ("t-2", [3])])
    async with store.transaction() as tx:
        assert await tx.turns.records(ref) == [("t-1", {"turn": 1}), ("t-2", [3])]


async def test_bad_turn_ids_are_refused(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    for bad in ("", "a/b", "x" * 129):
        with pytest.raises(InvalidIdentifierError):
            async with store.transaction() as tx:
                await tx.turns.insert(ref, bad, [1])
        async with store.transaction() as tx:
            with pytest.raises(InvalidIdentifierError):
                await tx.turns.get(ref, bad)


async def test_a_lookup_first_in_a_transaction_leaves_the_session_as_later_reads_see_it(
    store: StateStore, ref: SessionRef
) -> None:
    """A turn's first read (its record) also reads the header and whether the session has
    hints (the SQL store answers later reads from it); what the transaction reads or writes
    afterwards is still current."""
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.turns.insert(ref, "t-1", [1])
    async with store.transaction(read_only=True) as tx:
        assert await tx.turns.get(ref, "t-1") == [1]
        assert await tx.conversation.hints(ref) == []
        info = await tx.sessions.get(ref)
        assert info is not None and info.ref == ref
    async with store.transaction() as tx:
        assert await tx.turns.get(ref, "t-2") is None
        assert await tx.conversation.hints(ref) == []
        await tx.conversation.add_hint(ref, "answer briefly")
        assert [h.text for h in await tx.conversation.hints(ref)] == ["answer briefly"]
    async with store.transaction(read_only=True) as tx:
        assert await tx.turns.get(ref, "t-2") is None
        assert [h.text for h in await tx.conversation.hints(ref)] == ["answer briefly"]
    async with store.transaction() as tx:
        header = await tx.sessions.get(ref)
    async with store.transaction() as tx:
        assert await tx.turns.get(ref, "t-1") == [1]
        assert await tx.sessions.get(ref) == header  # the header read with the record
    async with store.transaction(read_only=True) as tx:
        other = SessionRef(namespace=ref.namespace, agent_id=ref.agent_id, session_id="absent")
        assert await tx.turns.get(other, "t-1") is None
        assert await tx.sessions.get(other) is None


async def test_hints_restored_after_a_lookup_are_seen_in_the_same_transaction(
    store: StateStore, ref: SessionRef
) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        assert await tx.turns.get(ref, "t-1") is None
        assert await tx.conversation.hints(ref) == []
        await tx.conversation.restore(
            ref, [], hints=[Hint(id=1, text="restored", created_at=CREATED)]
        )
        assert [h.text for h in await tx.conversation.hints(ref)] == ["restored"]
