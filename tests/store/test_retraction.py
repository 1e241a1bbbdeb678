"""Conformance: retracting the newest message (a framework session's ``pop_item``) hides it
from every reader and deletes nothing; only a reset (``clear``) removes it."""

from __future__ import annotations

from statecore.core._models import SessionRef
from statecore.store import StateStore
from tests.store.conftest import FakeClock
from tests.store.helpers import assistant, ensure, user


async def test_retract_last_hides_the_newest_message_and_keeps_the_row(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        stored = await tx.conversation.append(
            ref, "t1", [user("one"), assistant("two"), user("three")]
        )
    async with store.transaction() as tx:
        taken = await tx.conversation.retract_last(ref)
    assert taken == stored[2]

    async with store.transaction() as tx:
        assert await tx.conversation.messages(ref) == stored[:2]
        assert await tx.conversation.tail(ref) == stored[:2]
        assert await tx.conversation.tail(ref, max_messages=1) == stored[1:2]
        # Audit and inspection still see it, marked with when it was taken back.
        assert await tx.conversation.messages(ref, include_retracted=True) == stored
        assert await tx.conversation.retracted(ref) == {3: clock()}
        info = await tx.sessions.get(ref)
    assert info is not None and info.message_count == 3


async def test_a_retraction_moves_the_sessions_idle_clock(
    store: StateStore, ref: SessionRef, clock: FakeClock
) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "t1", [user("one"), assistant("two")])
    retracted_at = clock.advance(60)
    async with store.transaction() as tx:
        await tx.conversation.retract_last(ref)
    async with store.transaction() as tx:
        info = await tx.sessions.get(ref)
    assert info is not None and info.last_accessed == retracted_at


async def test_retraction_repeats_newest_first_and_survives_later_appends(
    store: StateStore, ref: SessionRef
) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        first = await tx.conversation.append(ref, "t1", [user("one"), assistant("two")])
    async with store.transaction() as tx:
        assert (await tx.conversation.retract_last(ref)) == first[1]
        assert (await tx.conversation.retract_last(ref)) == first[0]
        assert await tx.conversation.retract_last(ref) is None
    async with store.transaction() as tx:
        later = await tx.conversation.append(ref, "t2", [user("three")])
    async with store.transaction() as tx:
        assert await tx.conversation.messages(ref) == later
        assert await tx.conversation.tail(ref) == later
        assert sorted(await tx.conversation.retracted(ref)) == [1, 2]


async def test_a_rolled_back_retraction_leaves_the_message_visible(
    store: StateStore, ref: SessionRef
) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        stored = await tx.conversation.append(ref, "t1", [user("one")])

    class Abort(Exception):
        pass

    try:
        async with store.transaction() as tx:
            await tx.conversation.retract_last(ref)
            raise Abort
    except Abort:
        pass
    async with store.transaction() as tx:
        assert await tx.conversation.messages(ref) == stored
        assert await tx.conversation.retracted(ref) == {}


async def test_only_clear_removes_retracted_messages(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "t1", [user("one"), assistant("two")])
        await tx.conversation.retract_last(ref)
    async with store.transaction() as tx:
        assert await tx.conversation.clear(ref) == 2
        assert await tx.conversation.retracted(ref) == {}
        assert await tx.conversation.messages(ref, include_retracted=True) == []
