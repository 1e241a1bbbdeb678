"""SqlStateStore: the storage contract on SQLite, PostgreSQL and MariaDB/MySQL."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from statecore.core._change_events import NewEvent
from statecore.core._errors import ConflictError, StatecoreError
from statecore.core._limits import DEFAULT_SESSION_TTL_SECONDS
from statecore.core._models import SessionInfo, SessionRef, TokenUsage
from statecore.core._tokens import TokenCounter
from statecore.store._base import Clock, StateStore, StoreTransaction
from statecore.store._inputs import (
    check_aware,
    check_flag,
    check_int,
    check_ttl_seconds,
)
from statecore.store._signals import WakeSignal
from statecore.store.sql import _turn_commit as turn_commit
from statecore.store.sql._context import SqlContext
from statecore.store.sql._conversation import SqlConversationStore
from statecore.store.sql._engine import (
    READ_ONLY_OPTION,
    create_store_engine,
    dialect_name,
    is_sqlite_memory,
)
from statecore.store.sql._events import SqlEventStore
from statecore.store.sql._flow import SqlFlowStore
from statecore.store.sql._header_memo import HeaderMemos
from statecore.store.sql._kv import SqlKVStore
from statecore.store.sql._orchestration import SqlOrchestrationStore
from statecore.store.sql._revision import require_head, upgrade_engine
from statecore.store.sql._scoped_state import SqlScopedStateStore
from statecore.store.sql._sessions import SqlSessionStore
from statecore.store.sql._transient import is_transient_conflict
from statecore.store.sql._turn_records import SqlTurnRecordStore
from statecore.store.sql._turn_streams import SqlTurnStreams
from statecore.store.sql._window_cache import DEFAULT_WINDOW_CACHE_MESSAGES, WindowCache

# Stores with a transaction open in the current task. A nested transaction() would take a
# second connection and, on SQLite, wait for the write lock its own caller holds.
_open_in_task: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "statecore_sql_open_transactions", default=frozenset()
)


def utc_now() -> datetime:
    return datetime.now(UTC)


class SqlTransaction(StoreTransaction):
    """The modules bound to one SQL transaction (one connection)."""

    events: SqlEventStore
    kv: SqlKVStore
    orchestration: SqlOrchestrationStore
    turns: SqlTurnRecordStore

    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx
        self.events = SqlEventStore(ctx)
        self.sessions = SqlSessionStore(ctx)
        self.conversation = SqlConversationStore(ctx)
        self.kv = SqlKVStore(ctx)
        self.turns = SqlTurnRecordStore(ctx)
        self.state = SqlScopedStateStore(ctx)
        self.flow = SqlFlowStore(ctx)
        self.orchestration = SqlOrchestrationStore(ctx)
        self.open_change_ledger()

    @property
    def now(self) -> datetime:
        return self._ctx.now

    async def _begin_turn(self, ref: SessionRef, turn_id: str, messages_only: bool) -> SessionInfo:
        # PostgreSQL, a chat turn of a session whose previous turn this process committed:
        # nothing is sent until the turn's one statement (_turn_commit). Otherwise
        # the header's locked read, with whether the turn has messages beside it. Either
        # way ensure then answers from the row this transaction holds.
        if not (messages_only and self._ctx.defer_turn(ref, turn_id)):
            await self._ctx.find_session_for_turn(ref, turn_id)
        return await self.sessions.ensure(ref)

    async def finish_turn(
        self,
        ref: SessionRef,
        turn_id: str,
        record: Any,
        marker: tuple[str, str, Any],
        events: Sequence[NewEvent],
        usage: TokenUsage | None = None,
    ) -> None:
        if self._ctx.dialect != "postgresql":
            await super().finish_turn(ref, turn_id, record, marker, events, usage)
            return
        await turn_commit.finish_turn(self, self._ctx, ref, turn_id, record, marker, events, usage)


class SqlStateStore(StateStore):
    """The storage contract on SQL through SQLAlchemy's async engine.

    Create it with ``await SqlStateStore.connect(url)``; the database must be migrated first
    (``statecore db upgrade`` or ``statecore.store._migrate.upgrade_database``)."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        token_counter: TokenCounter | None = None,
        clock: Clock | None = None,
        default_ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS,
        window_cache_messages: int = DEFAULT_WINDOW_CACHE_MESSAGES,
    ) -> None:
        self.engine = engine
        self.dialect = dialect_name(engine.url)
        self._counter = token_counter if token_counter is not None else TokenCounter()
        self._clock: Clock = clock if clock is not None else utc_now
        self._default_ttl = int(check_ttl_seconds(default_ttl_seconds, "default_ttl_seconds"))
        # SQLite has one writer. Writers of this store queue here, in order, instead of
        # polling the database lock (SQLite's busy handler sleeps up to 100 ms between
        # tries, which is what a queued turn waited). An in-memory database lives on one
        # shared connection, so there every transaction, reads included, takes its turn.
        self._memory = is_sqlite_memory(engine.url)
        self._turns = asyncio.Lock() if self.dialect == "sqlite" else None
        self._max_packet_bytes: int | None = None
        self._closed = False
        # Context windows read lately: a session's next turn reads only the rows added since.
        self._windows = WindowCache(
            check_int(window_cache_messages, "window_cache_messages", minimum=0)
        )
        # Headers as this process's turn commits left them (PostgreSQL): a session's next
        # chat turn commits in one statement (_turn_commit).
        self._memos = HeaderMemos() if self.dialect == "postgresql" else None
        self._streams = SqlTurnStreams(
            engine, self.dialect, self._clock, lambda: self._taking_turns(False)
        )

    @property
    def turn_streams(self) -> SqlTurnStreams:
        return self._streams

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        token_counter: TokenCounter | None = None,
        clock: Clock | None = None,
        default_ttl_seconds: int = DEFAULT_SESSION_TTL_SECONDS,
        check_schema: bool = True,
        window_cache_messages: int = DEFAULT_WINDOW_CACHE_MESSAGES,
        **engine_kwargs: Any,
    ) -> SqlStateStore:
        """Open a store on ``url`` (``sqlite+aiosqlite://``, ``postgresql+asyncpg://``,
        ``mysql+asyncmy://``). ``check_schema`` refuses a database that is not at the
        migration head with MigrationError; an in-memory SQLite database
        (``sqlite+aiosqlite://``) is migrated here instead, since it starts empty every time.
        ``window_cache_messages`` bounds the context windows kept in this process between
        turns (0 turns the cache off; see ``window_cache``). ``engine_kwargs`` go to
        create_async_engine."""
        check_ttl_seconds(default_ttl_seconds, "default_ttl_seconds")
        engine = create_store_engine(url, **engine_kwargs)
        try:
            if is_sqlite_memory(engine.url):
                # A new in-memory database is always empty and lives only as long as this
                # engine, so nothing else could ever migrate it: build the schema now.
                await upgrade_engine(engine)
            elif check_schema:
                await require_head(engine)
            return cls(
                engine,
                token_counter=token_counter,
                clock=clock,
                default_ttl_seconds=default_ttl_seconds,
                window_cache_messages=window_cache_messages,
            )
        except BaseException:
            await engine.dispose()
            raise

    def transaction(
        self, *, read_only: bool = False
    ) -> AbstractAsyncContextManager[StoreTransaction]:
        """Open a transaction: ``async with store.transaction() as tx: ...``. It commits
        when the block ends and rolls back when it raises.

        ``read_only``: the block only reads. On SQLite it then starts without the write lock
        (a deferred ``BEGIN`` on a WAL snapshot), so it neither waits for writers nor holds
        them up. On PostgreSQL at READ COMMITTED, where every statement reads its own
        snapshot anyway, its reads open no server transaction (no BEGIN or COMMIT; see
        ``prebuilt_statements.run``). A block that writes anyway still works (its first write
        begins the transaction), but may lose to a writer and be run again by
        ``run_transaction``."""
        return self._transaction(check_flag(read_only, "read_only"))

    @asynccontextmanager
    async def _transaction(self, read_only: bool = False) -> AsyncIterator[StoreTransaction]:
        if self._closed:
            raise StatecoreError("this store is closed; open a new one")
        if id(self) in _open_in_task.get():
            raise StatecoreError(
                "a transaction of this store is already open in this task; use the modules "
                "of the open transaction instead of nesting transaction() blocks"
            )
        token = _open_in_task.set(_open_in_task.get() | {id(self)})
        try:
            async with self._taking_turns(read_only):
                now = check_aware(self._clock(), "clock()")
                async with self.engine.connect() as conn:
                    if read_only:
                        conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
                    try:
                        async with conn.begin():
                            max_packet = await self._max_packet(conn)
                            ctx = SqlContext(
                                conn,
                                now,
                                self._counter,
                                self._default_ttl,
                                max_packet,
                                # A read-only block cannot leave uncommitted rows behind in
                                # the cache (see window_cache).
                                windows=self._windows if read_only else None,
                                read_only=read_only,
                                memos=None if read_only else self._memos,
                            )
                            try:
                                tx = SqlTransaction(ctx)
                                yield tx
                                await ctx.send_touches()
                                # Last: the feed's numbering holds the namespace's row lock
                                # until commit, so nothing may wait on a session after it.
                                await tx.record_unclaimed_changes()
                            finally:
                                ctx.open = False
                        # Committed: what the transaction learnt of headers is now true.
                        ctx.settle_memos()
                    except IntegrityError as exc:
                        # Expected conflicts are translated where they happen; one reaching
                        # here is a concurrent write the modules did not foresee.
                        raise ConflictError(
                            "a concurrent write conflicted with this transaction; nothing was "
                            f"committed. Retry it ({exc.orig.__class__.__name__})"
                        ) from exc
        finally:
            _open_in_task.reset(token)

    async def _max_packet(self, conn: AsyncConnection) -> int | None:
        # Read once: the server's cap on one statement, which a large document can exceed.
        if self.dialect != "mysql":
            return None
        if self._max_packet_bytes is None:
            found = await conn.scalar(text("SELECT @@max_allowed_packet"))
            self._max_packet_bytes = int(found)
        return self._max_packet_bytes

    def _taking_turns(self, read_only: bool) -> AbstractAsyncContextManager[object]:
        if self._turns is not None and (self._memory or not read_only):
            return self._turns
        return contextlib.nullcontext()

    async def close(self) -> None:
        """Release every pooled connection; the store cannot be used afterwards."""
        self._closed = True
        await self.engine.dispose()

    def new_events_signal(
        self, namespace: str, *, poll_interval: float
    ) -> AbstractAsyncContextManager[WakeSignal]:
        """On PostgreSQL a follower is woken by the commit's NOTIFY (no polling); other
        databases are read again every ``poll_interval`` seconds."""
        if self.dialect == "postgresql":
            from statecore.store.sql._notify import listen_for_events

            return listen_for_events(self.engine, namespace)
        return super().new_events_signal(namespace, poll_interval=poll_interval)

    def is_transient_error(self, error: BaseException) -> bool:
        """A deadlock or lock wait timeout (MariaDB/MySQL 1213, 1205), a serialization
        failure or deadlock (PostgreSQL 40001, 40P01), or a busy database (SQLite, after its
        busy timeout): see ``statecore.store.run_transaction``."""
        return is_transient_conflict(error, self.dialect)
