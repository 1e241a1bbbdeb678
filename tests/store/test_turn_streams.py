"""Conformance: stream rows of running turns (TurnStreamStore) on every backend."""

from __future__ import annotations

import asyncio

import pytest

from statecore.core._errors import InvalidIdentifierError, InvalidLimitError
from statecore.core._limits import MAX_STREAM_TEXT_CHARS
from statecore.core._models import SessionRef, ToolCall
from statecore.store import StateStore
from tests.store.helpers import ensure


async def test_write_read_and_remove(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    streams = store.turn_streams
    assert await streams.read(ref, "t1") is None
    assert await streams.write(ref, "t1", 1, "Hel")
    assert await streams.write(ref, "t1", 1, "Hello, wo")
    got = await streams.read(ref, "t1")
    assert got is not None and (got.attempt, got.text, got.full) == (1, "Hello, wo", False)
    call = ToolCall(id="c1", name="lookup", arguments='{"q":"é"}')
    assert await streams.write(ref, "t1", 1, "Hello, world", [call])
    got = await streams.read(ref, "t1")
    assert got is not None and got.tool_calls == (call,)
    assert await streams.count(ref) == 1
    assert await streams.remove(ref, "t1")
    assert not await streams.remove(ref, "t1")
    assert await streams.read(ref, "t1") is None
    assert await streams.count(ref) == 0


async def test_a_newer_attempt_replaces_the_row_and_an_older_one_cannot(
    store: StateStore, ref: SessionRef
) -> None:
    await ensure(store, ref)
    streams = store.turn_streams
    assert await streams.write(ref, "t1", 1, "first attempt's text")
    assert await streams.write(ref, "t1", 2, "")
    got = await streams.read(ref, "t1")
    assert got is not None and (got.attempt, got.text) == (2, "")
    # The superseded attempt, still running somewhere, writes on: refused, nothing changes.
    assert not await streams.write(ref, "t1", 1, "first attempt's text, longer")
    got = await streams.read(ref, "t1")
    assert got is not None and (got.attempt, got.text) == (2, "")


async def test_the_row_is_bounded(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    long = "x" * (MAX_STREAM_TEXT_CHARS + 100)
    assert await store.turn_streams.write(ref, "t1", 1, long)
    got = await store.turn_streams.read(ref, "t1")
    assert got is not None and got.full and len(got.text) == MAX_STREAM_TEXT_CHARS


async def test_rows_belong_to_their_session(
    store: StateStore, ref: SessionRef, make_ref: object
) -> None:
    other = make_ref("s2")  # type: ignore[operator]
    await ensure(store, ref)
    await ensure(store, other)
    assert await store.turn_streams.write(ref, "t1", 1, "mine")
    assert await store.turn_streams.read(other, "t1") is None
    # No session, no row.
    missing = SessionRef(namespace=ref.namespace, agent_id="agent", session_id="nobody")
    assert not await store.turn_streams.write(missing, "t1", 1, "text")
    assert await store.turn_streams.read(missing, "t1") is None


async def test_deleting_the_session_deletes_its_rows(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    assert await store.turn_streams.write(ref, "t1", 1, "text")
    async with store.transaction() as tx:
        assert await tx.sessions.delete(ref)
    assert await store.turn_streams.read(ref, "t1") is None
    assert await store.turn_streams.count(ref) == 0


async def test_bad_input_is_refused(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    with pytest.raises(InvalidIdentifierError):
        await store.turn_streams.write(ref, "bad turn id!", 1, "x")
    with pytest.raises(InvalidLimitError):
        await store.turn_streams.write(ref, "t1", 0, "x")
    with pytest.raises(InvalidIdentifierError):
        await store.turn_streams.read(ref, "")


async def test_a_reader_is_woken_or_polls(store: StateStore, ref: SessionRef) -> None:
    await ensure(store, ref)
    async with store.turn_streams.changes(ref, "t1", poll_interval=0.05) as signal:
        signal.arm()
        loop = asyncio.get_running_loop()
        started = loop.time()
        writer = asyncio.create_task(store.turn_streams.write(ref, "t1", 1, "x"))
        await signal.wait(5.0)
        await writer
        # Woken by the write (memory, PostgreSQL) or by the poll timer: well before 5 s.
        assert loop.time() - started < 2.0
