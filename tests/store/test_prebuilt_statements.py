"""A turn's prebuilt statements run on SQLite and PostgreSQL without SQLAlchemy's execution
(statecore.store.sql._prebuilt_statements), and nobody can tell: the same rows and values, the same
errors, a lost connection replaced, and every statement still visible to whoever listens
to the engine's events or logs its statements."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, event, insert, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, StatementError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from statecore.core._errors import ConflictError
from statecore.core._models import KVScope, Message, SessionRef
from statecore.operations._turn_commit import snapshot
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from statecore.store.sql import _prebuilt_statements as direct
from statecore.store.sql._context import SqlContext
from statecore.store.sql._conversation import _insert_messages
from statecore.store.sql._message_rows import stored_columns
from statecore.store.sql._session_header import select_session
from tests.dbs import fresh_database, server_down_reason

REF = SessionRef(namespace="direct", agent_id="agent", session_id="s1")
SCOPE = KVScope(namespace="direct", owner="agent/s1")
START = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


DATABASES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgres", marks=pytest.mark.postgres),
]


@asynccontextmanager
async def database(kind: str, tmp_path: Path, label: str) -> AsyncIterator[str]:
    """A fresh, migrated database of ``kind`` ('sqlite', 'postgresql', 'mysql')."""
    if kind == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / f'{label}.db'}"
        await upgrade_database(url)
        yield url
        return
    reason = await server_down_reason(kind)
    if reason is not None:
        pytest.skip(reason)
    async with fresh_database(kind, label) as url:
        await upgrade_database(url)
        yield url


@pytest.fixture(params=DATABASES)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def store(kind: str, tmp_path: Path) -> AsyncIterator[SqlStateStore]:
    async with database(kind, tmp_path, "direct") as url:
        opened = await SqlStateStore.connect(url, clock=Clock())
        try:
            yield opened
        finally:
            await opened.close()


def _context(tx: Any) -> SqlContext:
    ctx = tx._ctx
    assert isinstance(ctx, SqlContext)
    return ctx


async def _header(store: SqlStateStore) -> Any:
    params = {"p_namespace": REF.namespace, "p_agent_id": REF.agent_id, "p_session_id": "s1"}
    async with store.transaction() as tx:
        return await _context(tx).execute(select_session(False), params)


async def _work(store: SqlStateStore) -> dict[str, Any]:
    """A few turns' worth of writes through the stores, then everything they read back."""
    for n in range(3):
        async with store.transaction() as tx:
            await tx.sessions.ensure(REF, ttl_seconds=3600)
            await tx.conversation.append(
                REF,
                f"turn-{n}",
                [
                    Message(role="user", content=f"question {n} \u00e9\u4e2d"),
                    Message(role="assistant", content=f"answer {n}", metadata={"n": n}),
                ],
            )
            await tx.kv.put(SCOPE, "b", "latest", {"turn": n}, ttl_seconds=60)
            await tx.orchestration.count_token_usage(REF, 10 + n, 5)
            await tx.turns.insert(REF, f"turn-{n}", [n, n * 2])
    async with store.transaction(read_only=True) as tx:
        info = await tx.sessions.get(REF)
        return {
            "session": info,
            "messages": await tx.conversation.messages(REF),
            "tail": await tx.conversation.tail(REF, max_tokens=40),
            "kv": await tx.kv.get(SCOPE, "b", "latest"),
            "turn": await tx.turns.get(REF, "turn-1"),
            "orchestration": await tx.orchestration.get(REF),
            "snapshot": await snapshot(tx, REF),
            "hints": await tx.conversation.hints(REF),
        }


async def test_a_prebuilt_statement_skips_sqlalchemy_when_nobody_listens(
    store: SqlStateStore,
) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
    result = await _header(store)
    assert isinstance(result, direct.DirectResult)
    row = result.first()
    assert row.session_id == "s1" and row._mapping["agent_id"] == "agent"
    assert row.created_at.tzinfo is not None  # the column type's own result processing


async def test_a_listener_on_the_engine_sees_every_statement_again(store: SqlStateStore) -> None:
    seen: list[str] = []

    def statement(_c: Any, _cur: Any, sql: str, *_: Any) -> None:
        seen.append(sql)

    event.listen(store.engine.sync_engine, "before_cursor_execute", statement)
    try:
        async with store.transaction() as tx:
            await tx.sessions.ensure(REF)
        result = await _header(store)
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", statement)
    assert not isinstance(result, direct.DirectResult)
    assert any(sql.startswith("SELECT statecore_sessions.id") for sql in seen)
    assert isinstance(await _header(store), direct.DirectResult)


async def test_a_statement_log_sees_every_statement_too(kind: str, tmp_path: Path) -> None:
    async with database(kind, tmp_path, "echo") as url:
        store = await SqlStateStore.connect(url, echo=True)
        try:
            async with store.transaction() as tx:
                await tx.sessions.ensure(REF)
            assert not isinstance(await _header(store), direct.DirectResult)
        finally:
            await store.close()


async def test_direct_and_sqlalchemy_read_and_write_the_same_values(
    kind: str, tmp_path: Path
) -> None:
    found: dict[str, dict[str, Any]] = {}
    for way in ("direct", "sqlalchemy"):
        async with database(kind, tmp_path, way) as url:
            store = await SqlStateStore.connect(url, clock=Clock())

            def nothing(*_: Any) -> None:
                pass

            if way == "sqlalchemy":
                event.listen(store.engine.sync_engine, "before_cursor_execute", nothing)
            try:
                found[way] = await _work(store)
            finally:
                await store.close()
    assert found["direct"] == found["sqlalchemy"]
    assert len(found["direct"]["messages"]) == 6
    assert found["direct"]["kv"].revision == 3
    assert found["direct"]["session"].last_accessed.tzinfo is not None


async def test_a_direct_statement_fails_as_sqlalchemy_fails_and_the_store_stays_healthy(
    store: SqlStateStore,
) -> None:
    await _work(store)
    async with store.transaction(read_only=True) as tx:
        before = await tx.conversation.messages(REF)
    with pytest.raises(ConflictError) as caught:
        async with store.transaction() as tx:
            ctx = _context(tx)
            session = await ctx.session_row(REF, lock=True)
            first = before[0]
            again = stored_columns(
                session.id,
                Message(role="user", content="the same seq twice"),
                seq=first.seq,
                turn_id="turn-x",
                index=0,
                tokens=1,
                cumulative_tokens=1,
                created_at=ctx.now,
            )
            await ctx.execute(_insert_messages(), [again])
    cause = caught.value.__cause__
    assert isinstance(cause, IntegrityError)
    if store.dialect == "sqlite":
        assert isinstance(cause.orig, sqlite3.IntegrityError)
    else:
        assert getattr(cause.orig, "sqlstate", None) == "23505"  # unique_violation
    async with store.transaction(read_only=True) as tx:
        assert await tx.conversation.messages(REF) == before
    async with store.transaction() as tx:  # the session takes the next turn as usual
        await tx.conversation.append(REF, "turn-9", [Message(role="user", content="next")])
    async with store.transaction(read_only=True) as tx:
        after = await tx.conversation.messages(REF)
    assert after[:-1] == before and after[-1].seq == before[-1].seq + 1


async def test_several_rows_go_in_one_executemany(store: SqlStateStore) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        stored = await tx.conversation.append(
            REF, "turn-1", [Message(role="user", content=f"m{i}") for i in range(5)]
        )
    async with store.transaction(read_only=True) as tx:
        assert await tx.conversation.messages(REF) == stored
    assert [m.seq for m in stored] == [1, 2, 3, 4, 5]


async def test_a_statement_that_needs_sqlalchemy_at_execution_keeps_it(
    store: SqlStateStore,
) -> None:
    # A Python-side column default is computed by SQLAlchemy as it executes the statement.
    table = Table(
        f"direct_defaults_{uuid.uuid4().hex[:8]}",
        MetaData(),
        Column("x", Integer, default=lambda: 7),
    )
    statement = direct.register(insert(table))
    async with store.engine.connect() as conn:
        assert direct.driver_for(conn) is not None
        plan = direct._PLANS[id(statement)]
        assert plan.compiled((), False, conn.dialect) is None
        await conn.run_sync(lambda sync: table.create(sync))
        await conn.commit()
        async with conn.begin():
            await direct.run(conn, direct.driver_for(conn), statement, {})
            rows = (await conn.execute(table.select())).all()
        await conn.run_sync(lambda sync: table.drop(sync))
        await conn.commit()
    assert [tuple(r) for r in rows] == [(7,)]


@pytest.mark.postgres
async def test_a_connection_lost_under_a_direct_statement_is_replaced(tmp_path: Path) -> None:
    async with database("postgresql", tmp_path, "lost") as url:
        store = await SqlStateStore.connect(url, pool_size=1, max_overflow=0)
        admin = create_async_engine(url, poolclass=NullPool)
        try:
            await _work(store)
            with pytest.raises(DBAPIError) as caught:
                async with store.transaction() as tx:
                    ctx = _context(tx)
                    await tx.sessions.get(REF)  # a direct statement began the transaction
                    victim = await ctx.conn.scalar(text("SELECT pg_backend_pid()"))
                    async with admin.begin() as conn:
                        await conn.execute(text(f"SELECT pg_terminate_backend({victim})"))
                    await tx.kv.get(SCOPE, "b", "latest")
            assert caught.value.connection_invalidated
            # The pool's one connection was replaced: the next transaction just works.
            async with store.transaction(read_only=True) as tx:
                assert (await tx.kv.get(SCOPE, "b", "latest")).value == {"turn": 2}
                assert await tx.conversation.messages(REF)
        finally:
            await admin.dispose()
            await store.close()


@pytest.mark.mariadb
async def test_mariadb_statements_go_through_sqlalchemy(tmp_path: Path) -> None:
    async with database("mysql", tmp_path, "direct") as url:
        store = await SqlStateStore.connect(url)
        try:
            async with store.transaction() as tx:
                await tx.sessions.ensure(REF)
            result = await _header(store)
            async with store.engine.connect() as conn:
                assert direct.driver_for(conn) is None
        finally:
            await store.close()
    assert not isinstance(result, direct.DirectResult)
    assert result.first().session_id == "s1"


async def test_a_sqlite_begin_skips_sqlalchemy_unless_someone_watches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    real = Connection.exec_driver_sql

    def counted(self: Connection, statement: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(statement)
        return real(self, statement, *args, **kwargs)

    async with database("sqlite", tmp_path, "begin") as url:
        store = await SqlStateStore.connect(url)
        monkeypatch.setattr(Connection, "exec_driver_sql", counted)
        try:
            async with store.transaction() as tx:
                await tx.sessions.ensure(REF)
            async with store.transaction(read_only=True) as tx:
                assert await tx.sessions.get(REF) is not None
            assert sent == []
            seen: list[str] = []

            def statement(_c: Any, _cur: Any, sql: str, *_: Any) -> None:
                seen.append(sql)

            event.listen(store.engine.sync_engine, "before_cursor_execute", statement)
            async with store.transaction() as tx:
                await tx.sessions.get(REF)
            assert sent == ["BEGIN IMMEDIATE"] and seen[0] == "BEGIN IMMEDIATE"
        finally:
            await store.close()


async def test_a_sqlite_begin_that_cannot_take_the_lock_fails_as_a_transient_conflict(
    tmp_path: Path,
) -> None:
    async with database("sqlite", tmp_path, "busy") as url:
        store = await SqlStateStore.connect(url, connect_args={"timeout": 0.1})
        holder = sqlite3.connect(str(tmp_path / "busy.db"), isolation_level=None)
        try:
            async with store.transaction() as tx:
                await tx.sessions.ensure(REF)
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(OperationalError) as caught:
                async with store.transaction() as tx:
                    await tx.sessions.get(REF)
            assert store.is_transient_error(caught.value)
            holder.execute("ROLLBACK")
            async with store.transaction() as tx:  # the lock is free again: it just works
                assert await tx.sessions.get(REF) is not None
        finally:
            holder.close()
            await store.close()


async def test_a_missing_value_fails_as_sqlalchemy_fails(store: SqlStateStore) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
    with pytest.raises(StatementError, match="p_session_id"):
        async with store.transaction() as tx:
            await _context(tx).execute(
                select_session(False), {"p_namespace": "direct", "p_agent_id": "agent"}
            )
    assert (await _header(store)).first().session_id == "s1"


async def _server_state(admin: Any, ctx: SqlContext) -> str:
    """What PostgreSQL reports of the block's connection: 'idle' between statements outside
    a transaction, 'idle in transaction' inside one."""
    raw = await ctx.conn.get_raw_connection()
    pid = raw.driver_connection.get_server_pid()  # type: ignore[union-attr]
    async with admin.connect() as conn:
        found = await conn.scalar(
            text("SELECT state FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        )
    return str(found)


@asynccontextmanager
async def _postgres(
    tmp_path: Path, label: str, **engine_kwargs: Any
) -> AsyncIterator[tuple[SqlStateStore, Any]]:
    """A store on a fresh, migrated PostgreSQL database, and an engine of its own to look at
    the store's connections from outside."""
    async with database("postgresql", tmp_path, label) as url:
        store = await SqlStateStore.connect(url, **engine_kwargs)
        admin = create_async_engine(url, poolclass=NullPool)
        try:
            yield store, admin
        finally:
            await admin.dispose()
            await store.close()


@pytest.mark.postgres
async def test_a_read_only_block_reads_outside_a_server_transaction_at_read_committed(
    tmp_path: Path,
) -> None:
    async with _postgres(tmp_path, "reads") as (store, admin):
        expected = await _work(store)
        async with store.transaction(read_only=True) as tx:
            assert await tx.turns.get(REF, "turn-1") == expected["turn"]
            assert await tx.sessions.get(REF) == expected["session"]
            assert await tx.conversation.tail(REF, max_tokens=40) == expected["tail"]
            # Neither BEGIN nor COMMIT: the server holds no transaction for the block.
            assert await _server_state(admin, _context(tx)) == "idle"
        async with store.transaction() as tx:
            await tx.sessions.get(REF)
            assert await _server_state(admin, _context(tx)) == "idle in transaction"


@pytest.mark.postgres
async def test_a_read_only_block_that_writes_begins_a_transaction_and_rolls_it_back(
    tmp_path: Path,
) -> None:
    async with _postgres(tmp_path, "writes") as (store, admin):
        await _work(store)
        shared = KVScope(namespace="direct")  # no session's scope: no header lock first
        with pytest.raises(RuntimeError, match="after the write"):
            async with store.transaction(read_only=True) as tx:
                await tx.sessions.get(REF)
                # A prebuilt INSERT, sent directly: it begins the transaction itself.
                await tx.kv.put(shared, "b", "new", {"n": 1}, expected_revision=0)
                assert await _server_state(admin, _context(tx)) == "idle in transaction"
                raise RuntimeError("after the write")
        async with store.transaction(read_only=True) as tx:
            assert await tx.kv.get(shared, "b", "new") is None
        with pytest.raises(RuntimeError, match="after the write"):
            async with store.transaction(read_only=True) as tx:
                await tx.sessions.get(REF)
                await tx.kv.put(SCOPE, "b", "latest", {"turn": 99})
                assert await _server_state(admin, _context(tx)) == "idle in transaction"
                assert (await tx.kv.get(SCOPE, "b", "latest")).value == {"turn": 99}
                raise RuntimeError("after the write")
        async with store.transaction(read_only=True) as tx:
            assert (await tx.kv.get(SCOPE, "b", "latest")).value == {"turn": 2}
        async with store.transaction(read_only=True) as tx:
            await tx.kv.put(SCOPE, "b", "latest", {"turn": 3})
        async with store.transaction(read_only=True) as tx:
            assert (await tx.kv.get(SCOPE, "b", "latest")).value == {"turn": 3}


@pytest.mark.postgres
async def test_a_read_only_block_keeps_its_snapshot_above_read_committed(tmp_path: Path) -> None:
    async with _postgres(tmp_path, "snapshot", isolation_level="REPEATABLE READ") as (store, admin):
        await _work(store)
        async with store.transaction(read_only=True) as tx:
            before = await tx.kv.get(SCOPE, "b", "latest")
            assert await _server_state(admin, _context(tx)) == "idle in transaction"
            async with admin.begin() as conn:  # a write the block's snapshot predates
                await conn.execute(text("UPDATE statecore_kv_entries SET revision = revision + 10"))
            again = await tx.kv.get(SCOPE, "b", "latest")
            assert again is not None and before is not None
            assert again.revision == before.revision
