"""The window cache never changes what a window read returns.

Every case reads the window through a store with the cache and through a second store on the
same database without one, after each way the log can change: appends from another process,
retraction, clearing and writing again (on a clock that stands still, so write times cannot
tell rows apart), a deleted and re-created session, a moved window start, another budget, and
a write transaction that rolled back after reading its own rows. Each case runs twice: reading
the window alone, and reading a turn's record first as a turn does, which brings the cached
window's new rows along in the header's statement (``SqlContext.read_for_turn``).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from statecore.core._errors import InvalidLimitError
from statecore.core._models import Message, SessionRef, StoredMessage
from statecore.core._tokens import TokenCounter
from statecore.store.sql import SqlStateStore
from statecore.store.sql._window_cache import CachedWindow, WindowCache
from tests.store.conftest import FakeClock

BUDGET = 10_000
#: Whether ``_window`` reads a turn's record before the window (set per test, ``_read_style``).
TURN_READ_FIRST = False


@pytest.fixture(autouse=True, params=[False, True], ids=["window-alone", "after-turn-read"])
def _read_style(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "TURN_READ_FIRST", request.param)


@pytest.fixture
async def stores(
    backend: str, database_url: str | None, clock: FakeClock, token_counter: TokenCounter
) -> AsyncIterator[tuple[SqlStateStore, SqlStateStore, SqlStateStore]]:
    """(cached, uncached, writer): three stores on one database, as three processes."""
    if database_url is None:
        pytest.skip("the window cache belongs to the SQL store")
    opened = [
        await SqlStateStore.connect(database_url, token_counter=token_counter, clock=clock),
        await SqlStateStore.connect(
            database_url, token_counter=token_counter, clock=clock, window_cache_messages=0
        ),
        await SqlStateStore.connect(database_url, token_counter=token_counter, clock=clock),
    ]
    try:
        yield opened[0], opened[1], opened[2]
    finally:
        for store in opened:
            await store.close()


async def _window(
    store: SqlStateStore, ref: SessionRef, budget: int = BUDGET
) -> list[StoredMessage]:
    async with store.transaction(read_only=True) as tx:
        if TURN_READ_FIRST:
            assert await tx.turns.get(ref, "a-turn-not-committed") is None
        return await tx.conversation.tail(ref, max_tokens=budget)


async def _same(
    stores: tuple[SqlStateStore, SqlStateStore, SqlStateStore],
    ref: SessionRef,
    budget: int = BUDGET,
) -> list[StoredMessage]:
    cached, uncached, _ = stores
    got = await _window(cached, ref, budget)
    assert got == await _window(uncached, ref, budget)
    return got


async def _turn(store: SqlStateStore, ref: SessionRef, turn_id: str, *texts: str) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(ref)
        await tx.conversation.append(
            ref, turn_id, [Message(role="user", content=text) for text in texts]
        )


def _texts(window: list[StoredMessage]) -> list[str]:
    return [m.content for m in window]


async def test_appends_from_another_process_are_read(stores, ref: SessionRef) -> None:
    cached, _, writer = stores
    await _turn(cached, ref, "t1", "a", "b")
    assert _texts(await _same(stores, ref)) == ["a", "b"]
    await _turn(writer, ref, "t2", "c")
    await _turn(cached, ref, "t3", "d")
    assert _texts(await _same(stores, ref)) == ["a", "b", "c", "d"]
    assert _texts(await _same(stores, ref)) == ["a", "b", "c", "d"]
    assert cached._windows.held_messages == 4


async def test_retracted_messages_leave_the_cached_window(stores, ref: SessionRef) -> None:
    _, _, writer = stores
    await _turn(writer, ref, "t1", "a", "b", "c")
    await _same(stores, ref)
    async with writer.transaction() as tx:
        await tx.conversation.retract_last(ref)
        await tx.conversation.retract_last(ref)
    assert _texts(await _same(stores, ref)) == ["a"]
    await _turn(writer, ref, "t2", "d")
    assert _texts(await _same(stores, ref)) == ["a", "d"]


async def test_a_cleared_log_written_again_is_read_again(stores, ref: SessionRef) -> None:
    # The clock stands still: the new rows have the old ones' seq, turn id and write time.
    _, _, writer = stores
    await _turn(writer, ref, "t1", "first", "second")
    await _same(stores, ref)
    async with writer.transaction() as tx:
        await tx.conversation.clear(ref)
    assert await _same(stores, ref) == []
    await _turn(writer, ref, "t1", "other", "words")
    assert _texts(await _same(stores, ref)) == ["other", "words"]


async def test_a_cleared_log_with_the_same_last_message(stores, ref: SessionRef) -> None:
    # Only the older row differs: the anchor alone cannot tell, but the running token total
    # it carries does whenever the older rows' sizes differ.
    _, _, writer = stores
    await _turn(writer, ref, "t1", "short", "same")
    await _same(stores, ref)
    async with writer.transaction() as tx:
        await tx.conversation.clear(ref)
    await _turn(writer, ref, "t1", "a much longer first message than before", "same")
    assert _texts(await _same(stores, ref))[0].startswith("a much longer")


async def test_a_recreated_session_is_read_again(stores, ref: SessionRef) -> None:
    _, _, writer = stores
    await _turn(writer, ref, "t1", "old")
    await _same(stores, ref)
    async with writer.transaction() as tx:
        await tx.sessions.delete(ref)
    await _turn(writer, ref, "t9", "new")
    assert _texts(await _same(stores, ref)) == ["new"]


async def test_window_start_and_budget_changes(stores, ref: SessionRef) -> None:
    cached, _, writer = stores
    for n in range(6):
        await _turn(writer, ref, f"t{n}", f"message number {n}")
    whole = await _same(stores, ref)
    async with writer.transaction() as tx:
        await tx.conversation.set_window_start(ref, whole[2].seq)
    assert _texts(await _same(stores, ref)) == [f"message number {n}" for n in range(2, 6)]
    small = whole[-1].cumulative_tokens - whole[-3].cumulative_tokens
    assert len(await _same(stores, ref, small)) == 2
    # A larger budget than the cached window was read for: read whole again.
    assert len(await _same(stores, ref)) == 4
    assert cached._windows.held_messages == 4


async def test_rows_of_a_rolled_back_write_are_never_served(stores, ref: SessionRef) -> None:
    cached, _, writer = stores
    await _turn(writer, ref, "t1", "kept")
    await _same(stores, ref)

    class Abandon(Exception):
        pass

    with pytest.raises(Abandon):
        async with cached.transaction() as tx:
            await tx.conversation.append(ref, "t2", [Message(role="user", content="phantom")])
            assert _texts(await tx.conversation.tail(ref, max_tokens=BUDGET)) == [
                "kept",
                "phantom",
            ]
            raise Abandon
    assert _texts(await _same(stores, ref)) == ["kept"]
    await _turn(writer, ref, "t2", "real")
    assert _texts(await _same(stores, ref)) == ["kept", "real"]


async def test_the_cache_is_bounded(
    database_url: str | None, clock, token_counter, make_ref
) -> None:
    if database_url is None:
        pytest.skip("the window cache belongs to the SQL store")
    store = await SqlStateStore.connect(
        database_url, token_counter=token_counter, clock=clock, window_cache_messages=5
    )
    try:
        for name in ("s1", "s2", "s3"):
            await _turn(store, make_ref(name), "t1", "a", "b")
            await _window(store, make_ref(name))
        assert store._windows.held_messages == 4  # the oldest session's window went first
        await _turn(store, make_ref("big"), "t1", *"abcdef")
        assert len(await _window(store, make_ref("big"))) == 6  # too big to keep, still read
        assert store._windows.held_messages <= 5
    finally:
        await store.close()


async def test_the_cache_is_bounded_by_tokens_too(stores, make_ref) -> None:
    cached, _, _ = stores
    windows = {}
    for name in ("s1", "s2"):
        await _turn(cached, make_ref(name), "t1", "a few words of text", "and a few more words")
        windows[name] = await _window(cached, make_ref(name))
    per_window = sum(m.tokens for m in windows["s1"])
    cache = WindowCache(max_messages=100, max_tokens=per_window * 2 - 1)
    cache.put(1, CachedWindow(windows["s1"][0].seq, tuple(windows["s1"])))
    cache.put(2, CachedWindow(windows["s2"][0].seq, tuple(windows["s2"])))
    assert cache.get(1) is None and cache.get(2) is not None  # the older one made room
    cache.put(3, CachedWindow(1, tuple(windows["s1"] + windows["s2"])))  # alone too large
    assert cache.get(3) is None and cache.get(2) is not None


@pytest.mark.parametrize("bad", [True, "100", -1, 1.5])
async def test_a_bad_cache_bound_is_refused(database_url: str | None, bad: object) -> None:
    if database_url is None:
        pytest.skip("the window cache belongs to the SQL store")
    with pytest.raises(InvalidLimitError, match="window_cache_messages"):
        await SqlStateStore.connect(database_url, window_cache_messages=bad)  # type: ignore[arg-type]


def test_a_window_is_found_by_its_session_key(make_ref) -> None:
    ref = make_ref("s1")
    key = (ref.namespace, ref.agent_id, ref.session_id)
    first = StoredMessage(
        role="user",
        content="a",
        seq=1,
        turn_id="t1",
        index=0,
        tokens=1,
        cumulative_tokens=1,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    second = first.model_copy(update={"seq": 2, "index": 1})
    cache = WindowCache(max_messages=10)
    cache.put(7, CachedWindow(1, (first, second)), key)
    assert cache.anchor_for(key) == (7, 2)
    # The session deleted and created again: a new header row under the same key.
    cache.put(8, CachedWindow(1, (first,)), key)
    assert cache.anchor_for(key) == (8, 1) and cache.get(7) is None
    assert cache.held_messages == 1
    cache.discard(8)
    assert cache.anchor_for(key) is None and cache.held_messages == 0
    cache.put(9, CachedWindow(1, (first,)))  # kept without a key: found by primary key only
    assert cache.anchor_for(key) is None and cache.get(9) is not None
