"""Conformance: ``conversation.tokens_before``, what a window's token count is measured from,
on every backend. On SQLite and PostgreSQL an append's header UPDATE returns it, so a turn's
commit asks no more; these tests hold that answer to a fresh read of the log whatever the
append, a retraction, a new window start or a reset did before it in the same transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from sqlalchemy import event

from statecore.core._errors import StatecoreError
from statecore.core._models import SessionRef, StoredMessage
from statecore.operations._turn_commit import window_tokens
from statecore.store import StateStore
from statecore.store._base import StoreTransaction
from tests.store.helpers import assistant, ensure, user


def _expected(log: Sequence[StoredMessage], retracted: set[int], seq: int) -> int | None:
    """The running total before the first message at or after ``seq`` not retracted."""
    for message in log:
        if message.seq >= seq and message.seq not in retracted:
            return message.cumulative_tokens - message.tokens
    return None


async def _fresh(store: StateStore, ref: SessionRef, seq: int) -> int | None:
    """``tokens_before`` in a transaction of its own, which has appended nothing."""
    async with store.transaction(read_only=True) as tx:
        log = await tx.conversation.messages(ref, include_retracted=True)
        retracted = set(await tx.conversation.retracted(ref))
        found = await tx.conversation.tokens_before(ref, seq)
    assert found == _expected(log, retracted, seq)
    return found


async def _log(store: StateStore, ref: SessionRef, count: int, window_start: int = 1) -> None:
    """A session whose log holds ``count`` messages of turn t1, its window from
    ``window_start`` on (set in a transaction of its own)."""
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "t1", [user(f"t1 q{n} " * (n + 1)) for n in range(count)])
    if window_start != 1:
        async with store.transaction() as tx:
            await tx.conversation.set_window_start(ref, window_start)


def _statements(store: StateStore) -> Callable[[], list[str]]:
    """The SQL statements the store sends from now on (none for the memory store)."""
    sent: list[str] = []
    engine = getattr(store, "engine", None)
    if engine is not None:
        event.listen(
            engine.sync_engine,
            "before_cursor_execute",
            lambda _c, _cur, statement, *_: sent.append(statement),
        )
    return lambda: sent


def _answers_from_the_append(store: StateStore) -> bool:
    engine = getattr(store, "engine", None)
    return engine is not None and engine.dialect.name in ("sqlite", "postgresql")


async def _check_after_append(
    store: StateStore, tx: StoreTransaction, ref: SessionRef, turn: str, messages: list[Any]
) -> int | None:
    """Append ``messages`` in ``tx`` and return ``tokens_before`` of the window start, which
    on SQLite and PostgreSQL must come without another statement."""
    await tx.conversation.append(ref, turn, messages)
    info = await tx.sessions.get(ref)
    assert info is not None
    sent = _statements(store)
    found = await tx.conversation.tokens_before(ref, info.window_start_seq)
    if _answers_from_the_append(store):
        assert sent() == []
    return found


async def test_an_append_answers_for_a_window_that_starts_before_it(
    store: StateStore, ref: SessionRef
) -> None:
    await _log(store, ref, 4, window_start=3)
    async with store.transaction() as tx:
        found = await _check_after_append(store, tx, ref, "t2", [user("more"), assistant("yes")])
    assert found == await _fresh(store, ref, 3)
    assert found is not None and found > 0


@pytest.mark.parametrize("messages", [1, 3])
async def test_an_append_answers_for_a_window_that_starts_in_it(
    store: StateStore, ref: SessionRef, messages: int
) -> None:
    # The window starts past the stored log, at the first row this append writes: on
    # PostgreSQL the UPDATE cannot see that row (its CTE writes it), so the answer comes
    # from the rows appended.
    await _log(store, ref, 3, window_start=4)
    async with store.transaction() as tx:
        new = [user(f"new {n} " * (n + 2)) for n in range(messages)]
        found = await _check_after_append(store, tx, ref, "t2", new)
    assert found == await _fresh(store, ref, 4)
    async with store.transaction(read_only=True) as tx:
        info = await tx.sessions.get(ref)
        assert info is not None
        assert found == info.token_total - await window_tokens(tx, info)


async def test_a_retracted_first_message_is_skipped(store: StateStore, ref: SessionRef) -> None:
    await _log(store, ref, 3, window_start=3)
    async with store.transaction() as tx:
        assert await tx.conversation.retract_last(ref) is not None  # seq 3, the window's first
    async with store.transaction() as tx:
        found = await _check_after_append(store, tx, ref, "t2", [user("after the retraction")])
    assert found == await _fresh(store, ref, 3)
    async with store.transaction(read_only=True) as tx:
        (first,) = await tx.conversation.messages(ref, from_seq=4, limit=1)
    assert found == first.cumulative_tokens - first.tokens


async def test_what_an_append_learnt_is_forgotten_by_a_later_change(
    store: StateStore, ref: SessionRef
) -> None:
    await _log(store, ref, 2, window_start=3)
    # Retracting the window's only message, appended in the same transaction.
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "t2", [user("soon taken back")])
        await tx.conversation.retract_last(ref)
        assert await tx.conversation.tokens_before(ref, 3) is None
    assert await _fresh(store, ref, 3) is None
    # A new window start in the same transaction as the append.
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "t3", [user("four"), assistant("five")])
        await tx.conversation.set_window_start(ref, 5)
        inside = await tx.conversation.tokens_before(ref, 5)
    assert inside == await _fresh(store, ref, 5)


async def test_a_reset_after_an_append_forgets_it(store: StateStore, ref: SessionRef) -> None:
    # The window starts at 1 before and after the reset: only the reset tells.
    await _log(store, ref, 2)
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "t2", [user("three")])
        await tx.conversation.clear(ref)
        assert await tx.conversation.tokens_before(ref, 1) is None
    assert await _fresh(store, ref, 1) is None
    # And after the reset, the first append of the new log answers for it.
    async with store.transaction() as tx:
        found = await _check_after_append(store, tx, ref, "t3", [user("again")])
    assert found == 0 == await _fresh(store, ref, 1)


async def test_another_start_than_the_windows_is_read(store: StateStore, ref: SessionRef) -> None:
    await _log(store, ref, 4)
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "t2", [user("five")])
        for seq in (1, 2, 4, 5, 6):
            assert await tx.conversation.tokens_before(ref, seq) == await _inner(tx, ref, seq)


async def _inner(tx: StoreTransaction, ref: SessionRef, seq: int) -> int | None:
    log = await tx.conversation.messages(ref, include_retracted=True)
    return _expected(log, set(await tx.conversation.retracted(ref)), seq)


@pytest.mark.parametrize("seq", [-1, True, "1", None, 1.0])
async def test_a_bad_start_is_refused_typed(store: StateStore, ref: SessionRef, seq: Any) -> None:
    await ensure(store, ref)
    async with store.transaction() as tx:
        await tx.conversation.append(ref, "t1", [user("one")])
        with pytest.raises(StatecoreError):
            await tx.conversation.tokens_before(ref, seq)
    assert await _fresh(store, ref, 1) == 0
