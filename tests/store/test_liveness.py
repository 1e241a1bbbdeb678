"""PostgreSQL and MariaDB connections are pinged before use only after sitting idle
(statecore.store.sql._liveness): no round trip before a busy store's transactions, and a
connection that died while idle, as in a database restart, is replaced before it is used."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from statecore.store.sql import _liveness as liveness
from statecore.store.sql._engine import create_store_engine
from statecore.store.sql._liveness import PING_AFTER_IDLE_SECONDS
from tests.dbs import fresh_database

BACKEND_ID = {"postgresql": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}
KILL = {"postgresql": "SELECT pg_terminate_backend({id})", "mysql": "KILL {id}"}


@pytest.fixture(params=["postgresql", "mysql"])
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "ping") as url:
        yield url


@asynccontextmanager
async def one_connection(url: str) -> AsyncIterator[AsyncEngine]:
    """statecore's engine for ``url`` with a pool of exactly one connection."""
    engine = create_store_engine(url, pool_size=1, max_overflow=0)
    try:
        yield engine
    finally:
        await engine.dispose()


def dialect_of(engine: AsyncEngine) -> str:
    return "postgresql" if engine.dialect.name == "postgresql" else "mysql"


def count_pings(monkeypatch: pytest.MonkeyPatch, engine: AsyncEngine) -> list[int]:
    dialect = engine.sync_engine.dialect
    real = dialect.do_ping
    pings = [0]

    def counted(dbapi_connection: Any) -> bool:
        pings[0] += 1
        return bool(real(dbapi_connection))

    monkeypatch.setattr(dialect, "do_ping", counted)
    return pings


async def backend_id(engine: AsyncEngine) -> int:
    async with engine.begin() as conn:
        return int(await conn.scalar(text(BACKEND_ID[dialect_of(engine)])))


async def kill_the_pooled_connection(url: str, engine: AsyncEngine) -> int:
    """Kill the server session behind the engine's one pooled connection, from another
    connection; returns its id."""
    victim = await backend_id(engine)
    admin = create_async_engine(url, poolclass=NullPool)
    try:
        async with admin.begin() as conn:
            await conn.execute(text(KILL[dialect_of(engine)].format(id=victim)))
    finally:
        await admin.dispose()
    return victim


async def test_a_connection_in_steady_use_is_not_pinged(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with one_connection(url) as engine:
        pings = count_pings(monkeypatch, engine)
        ids = {await backend_id(engine) for _ in range(5)}
        assert len(ids) == 1  # one pooled connection, reused five times
        assert pings == [0]


async def test_a_connection_killed_while_idle_is_replaced_before_use(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with one_connection(url) as engine:
        pings = count_pings(monkeypatch, engine)
        first = await kill_the_pooled_connection(url, engine)
        await asyncio.sleep(PING_AFTER_IDLE_SECONDS + 0.2)
        # The ping finds it dead; the transaction runs on a new connection, no error seen.
        second = await backend_id(engine)
        assert second != first
        assert pings == [1]


async def test_a_connection_killed_between_two_quick_uses_fails_once_then_is_replaced(
    url: str,
) -> None:
    async with one_connection(url) as engine:
        first = await kill_the_pooled_connection(url, engine)
        # Back in use within the threshold: not pinged, so the drop surfaces as the
        # driver's disconnect error, as it would mid-transaction.
        with pytest.raises(DBAPIError) as raised:
            await backend_id(engine)
        assert raised.value.connection_invalidated
        assert await backend_id(engine) != first


async def test_a_pool_pre_ping_the_caller_passes_is_kept(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_store_engine(url, pool_size=1, max_overflow=0, pool_pre_ping=True)
    try:
        pings = count_pings(monkeypatch, engine)
        for _ in range(3):
            await backend_id(engine)
        # SQLAlchemy's own: every checkout but the connection's first.
        assert pings == [2]
    finally:
        await engine.dispose()


async def test_a_machine_suspended_while_the_connection_sat_idle_counts_as_idle(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with one_connection(url) as engine:
        pings = count_pings(monkeypatch, engine)
        first = await kill_the_pooled_connection(url, engine)
        # Suspended: the wall clock moved on, the monotonic clock stood still.
        later = SimpleNamespace(monotonic=time.monotonic, time=lambda: time.time() + 60)
        monkeypatch.setattr(liveness, "time", later)
        assert await backend_id(engine) != first
        assert pings == [1]


async def test_the_connection_returned_last_is_handed_out_first(url: str) -> None:
    engine = create_store_engine(url, pool_size=2, max_overflow=0)
    try:
        async with engine.connect() as a, engine.connect() as b:
            ids = [int(await c.scalar(text(BACKEND_ID[dialect_of(engine)]))) for c in (a, b)]
        # Closed in reverse order: a went back to the pool last. Handed out first every time,
        # it stays warm and b stays idle (first-in-first-out would alternate b, a, b, a).
        assert [await backend_id(engine) for _ in range(4)] == [ids[0]] * 4
    finally:
        await engine.dispose()


async def test_a_pool_class_of_the_callers_own_is_used_as_given(url: str) -> None:
    # NullPool takes no pool settings: statecore adds none to it, and it connects afresh
    # for every transaction, so there is nothing idle to ping.
    engine = create_store_engine(url, poolclass=NullPool)
    try:
        first = await backend_id(engine)
        assert await backend_id(engine) != first
    finally:
        await engine.dispose()
