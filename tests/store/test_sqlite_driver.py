"""SQLite connections make one trip to their thread per statement (statecore.store.sql.
sqlite_driver) and still behave exactly like SQLAlchemy's aiosqlite driver: rows, row counts,
inserted ids, streaming, errors and rollbacks."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from statecore.core.models import Message, SessionRef
from statecore.store.migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from statecore.store.sql.engine import create_store_engine
from statecore.store.sql.sqlite_driver import OneTripConnection

REF = SessionRef(namespace="trips", agent_id="agent", session_id="s1")


class TripCounter:
    """Trips to any SQLite connection's thread, and statements SQLAlchemy sends, while on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, engine: AsyncEngine) -> None:
        self.trips = 0
        self.statements = 0
        self.on = False
        real = OneTripConnection._execute

        async def counted(connection: OneTripConnection, fn: Any, *args: Any, **kw: Any) -> Any:
            self.trips += self.on
            return await real(connection, fn, *args, **kw)

        monkeypatch.setattr(OneTripConnection, "_execute", counted)
        event.listen(engine.sync_engine, "before_cursor_execute", self._statement)

    def _statement(self, *_: Any) -> None:
        self.statements += self.on


@pytest.fixture
async def engine(tmp_path: Any) -> AsyncIterator[AsyncEngine]:
    engine = create_store_engine(f"sqlite+aiosqlite:///{tmp_path / 'trips.db'}")
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
    try:
        yield engine
    finally:
        await engine.dispose()


async def test_a_turn_like_transaction_costs_one_trip_per_statement_plus_its_commit(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    await upgrade_database(url)
    store = await SqlStateStore.connect(url)
    try:
        counter = TripCounter(monkeypatch, store.engine)
        async with store.transaction() as tx:  # opens a pooled connection (its own trips)
            await tx.sessions.ensure(REF)
        counter.on = True
        async with store.transaction() as tx:
            await tx.conversation.append(REF, "t1", [Message(role="user", content="hello")])
            await tx.kv.put(REF.kv_scope, "notes", "k", {"n": 1})
        async with store.transaction(read_only=True) as tx:
            await tx.conversation.tail(REF, max_messages=10)
        counter.on = False
    finally:
        await store.close()
    # Each statement (BEGIN included) is one trip, each transaction adds its COMMIT, and
    # handing the connection back to the pool adds nothing. The stock driver made ~4 trips
    # per statement and one more for the pool's rollback.
    assert counter.statements >= 6
    assert counter.trips == counter.statements + 2


async def test_rows_counts_and_ids_come_back_as_with_the_stock_driver(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        inserted = await conn.execute(text("INSERT INTO t (v) VALUES ('a')"))
        assert inserted.lastrowid == 1 and inserted.rowcount == 1
        many = await conn.execute(
            text("INSERT INTO t (v) VALUES (:v)"), [{"v": "b"}, {"v": "c"}, {"v": "d"}]
        )
        assert many.rowcount == 3
        returned = await conn.execute(text("INSERT INTO t (v) VALUES ('e') RETURNING id, v"))
        assert returned.all() == [(5, "e")]
        updated = await conn.execute(text("UPDATE t SET v = v || '!' WHERE id > 3"))
        assert updated.rowcount == 2
        empty = await conn.execute(text("SELECT id FROM t WHERE id > 100"))
        assert empty.all() == []
        rows = await conn.execute(text("SELECT id, v FROM t ORDER BY id"))
        assert list(rows.keys()) == ["id", "v"]
        assert rows.all() == [(1, "a"), (2, "b"), (3, "c"), (4, "d!"), (5, "e!")]
        assert await conn.scalar(text("SELECT count(*) FROM t")) == 5


async def test_a_streamed_result_yields_every_row_in_chunks(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            text("INSERT INTO t (v) VALUES (:v)"), [{"v": f"r{i}"} for i in range(25)]
        )
        streamed = await conn.stream(text("SELECT v FROM t ORDER BY id"))
        chunks = [chunk async for chunk in streamed.partitions(10)]
    assert [len(c) for c in chunks] == [10, 10, 5]
    assert [row[0] for chunk in chunks for row in chunk] == [f"r{i}" for i in range(25)]


async def test_errors_keep_their_types_and_the_connection_stays_usable(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        async with conn.begin():
            await conn.execute(text("INSERT INTO t (id, v) VALUES (1, 'a')"))
        with pytest.raises(IntegrityError):
            async with conn.begin():
                await conn.execute(text("INSERT INTO t (id, v) VALUES (1, 'again')"))
        with pytest.raises(OperationalError, match="no such table"):
            async with conn.begin():
                await conn.execute(text("SELECT * FROM missing"))
        async with conn.begin():
            assert (await conn.execute(text("SELECT id, v FROM t"))).all() == [(1, "a")]


async def test_a_rollback_inside_a_transaction_still_undoes_its_writes(
    engine: AsyncEngine,
) -> None:
    class Undo(Exception):
        pass

    with pytest.raises(Undo):
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES ('gone')"))
            raise Undo
    async with engine.connect() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM t")) == 0


async def test_connection_threads_do_not_keep_the_interpreter_alive(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
    assert isinstance(driver, OneTripConnection)
    thread = getattr(driver, "_thread", driver)
    assert isinstance(thread, threading.Thread) and thread.daemon
