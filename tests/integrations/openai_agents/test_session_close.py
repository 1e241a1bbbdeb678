"""``StatecoreSession.close()`` as the SDK's sessions are closed (no ``await``) and as async
code closes it (``await``): the store's connections are gone either way, no coroutine is left
unawaited, and the session can be used again."""

from __future__ import annotations

import asyncio
import gc
import threading
import uuid
import warnings
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from statecore.integrations.openai_agents import StatecoreSession
from statecore.integrations.openai_agents._closing import Closing
from tests.dbs import POSTGRES_ADMIN_URL, fresh_database

ITEM = {"role": "user", "content": "hello"}

DIALECTS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=DIALECTS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "oaiclose") as url:
        yield url


def open_connections(url: str) -> int:
    """Connections this process holds to the database at ``url``: PostgreSQL backends of that
    database, or (SQLite) aiosqlite's connection threads."""
    if url.startswith("sqlite"):
        return sum(1 for t in threading.enumerate() if "_connection_worker_thread" in t.name)
    database = url.rsplit("/", 1)[-1]

    async def count() -> int:
        engine = create_async_engine(POSTGRES_ADMIN_URL, poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                found = await conn.execute(
                    text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d"),
                    {"d": database},
                )
                return int(found.scalar_one())
        finally:
            await engine.dispose()

    return _in_a_thread(count)


def _in_a_thread(make: object) -> int:
    """Run a coroutine function on a loop of its own in another thread (the test's own loop
    may be running)."""
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(asyncio.run(make())))  # type: ignore[operator]
    worker.start()
    worker.join(30)
    return result[0]


def wait_until_closed(url: str, before: int) -> int:
    """The connections held once the closed ones are gone, waiting up to 5 s: an aiosqlite
    connection's thread ends a moment after its close returns, later on a busy machine."""
    for _ in range(100):
        now = open_connections(url)
        if now <= before:
            return now
        threading.Event().wait(0.05)
    return open_connections(url)


def test_close_without_await_after_asyncio_run(url: str) -> None:
    before = open_connections(url)
    session = StatecoreSession(f"s-{uuid.uuid4().hex[:8]}", database_url=url)
    asyncio.run(session.add_items([ITEM]))
    assert open_connections(url) > before
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        closing = session.close()
        gc.collect()
    # With no loop running, the SDK's sessions close before close() returns; so does this.
    assert isinstance(closing, Closing) and closing.done
    assert wait_until_closed(url, before) == before
    # Closed is not dead: the next call opens the store again.
    assert asyncio.run(session.get_items()) == [ITEM]
    session.close()
    assert wait_until_closed(url, before) == before


def test_close_without_await_as_the_last_line_of_main(url: str) -> None:
    """The SDK's encrypted-session example: ``underlying_session.close()`` inside ``async def
    main``, run by ``asyncio.run``."""
    before = open_connections(url)
    session = StatecoreSession(f"s-{uuid.uuid4().hex[:8]}", database_url=url)

    async def main() -> None:
        await session.add_items([ITEM])
        session.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], caught
    assert wait_until_closed(url, before) == before


async def test_await_close_and_unawaited_close_in_async_code(url: str) -> None:
    before = open_connections(url)
    session = StatecoreSession(f"s-{uuid.uuid4().hex[:8]}", database_url=url)
    await session.add_items([ITEM])
    await session.close()
    assert wait_until_closed(url, before) == before
    assert await session.get_items() == [ITEM]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        closing = session.close()  # not awaited: it runs anyway
        for _ in range(200):
            if closing.done:
                break
            await asyncio.sleep(0.01)
        gc.collect()
    assert closing.done
    assert not [w for w in caught if "never awaited" in str(w.message)], caught
    assert wait_until_closed(url, before) == before
    # Closing twice, or a session never used, is a no-op either way.
    await session.close()
    await StatecoreSession("unused", database_url=url).close()
    StatecoreSession("unused", database_url=url).close()


async def test_a_store_opened_by_asyncio_run_is_closed_from_async_code(url: str) -> None:
    """Opened on a loop that has ended (the SDK's run_sync, an earlier asyncio.run) and closed
    from a running loop: closed on a private loop in a worker thread."""
    before = open_connections(url)
    session = StatecoreSession(f"s-{uuid.uuid4().hex[:8]}", database_url=url)
    other = threading.Thread(target=lambda: asyncio.run(session.add_items([ITEM])))
    other.start()
    await asyncio.to_thread(other.join, 60)
    assert open_connections(url) > before
    await session.close()
    assert wait_until_closed(url, before) == before


async def test_close_never_touches_a_store_passed_in(tmp_path: object) -> None:
    from statecore.store import open_store

    store = await open_store(f"sqlite:///{tmp_path}/given.db", migrate=True)
    try:
        session = StatecoreSession("given", store=store)
        await session.add_items([ITEM])
        await session.close()
        session.close()
        assert await session.get_items() == [ITEM]
    finally:
        await store.close()


def test_a_store_on_a_loop_running_in_another_thread_is_closed_there(url: str) -> None:
    before = open_connections(url)
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        session = StatecoreSession(f"s-{uuid.uuid4().hex[:8]}", database_url=url)
        asyncio.run_coroutine_threadsafe(session.add_items([ITEM]), loop).result(60)
        assert open_connections(url) > before
        assert session.close().done  # no loop here: closed on its own loop before returning
        assert wait_until_closed(url, before) == before
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        loop.close()


def test_a_store_on_a_stopped_loop_is_closed_on_that_loop(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK's ``Runner.run_sync`` runs on the thread's default loop and leaves it open:
    the store is closed on that loop, cleanly (no failed close logged)."""
    before = open_connections(url)
    loop = asyncio.new_event_loop()
    try:
        session = StatecoreSession(f"s-{uuid.uuid4().hex[:8]}", database_url=url)
        loop.run_until_complete(session.add_items([ITEM]))
        assert open_connections(url) > before
        assert session.close().done
        assert wait_until_closed(url, before) == before
        assert "Exception closing connection" not in caplog.text
    finally:
        loop.close()
