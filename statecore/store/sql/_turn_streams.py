"""Stream rows of running turns on SQL (``statecore.store._turn_streams``).

Each call is a short transaction of its own on a pooled connection, never the turn's. A write
is an UPDATE of the turn's row guarded by its attempt (``attempt <= :attempt``, so an older
attempt never overwrites a newer one's output) and, the first time, an INSERT ... SELECT
through the session's unique index that skips a row another writer inserted meanwhile. On
SQLite, writes queue on the store's writer lock like every other write.

PostgreSQL pushes: a write or removal sends ``NOTIFY statecore_turn_streams,
'<namespace>/<agent>/<session>/<turn>'`` in its transaction, and a reader LISTENs on that
channel and on the change feed's (a turn's commit notifies its namespace there), reading
again at least every ``STREAM_PUSH_FALLBACK_SECONDS`` in case the listener was dropped.
SQLite and MariaDB readers read again every poll interval.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from statecore.core._identifiers import validate_turn_id
from statecore.core._limits import STREAM_PUSH_FALLBACK_SECONDS
from statecore.core._models import SessionRef, ToolCall
from statecore.store._inputs import check_ref
from statecore.store._signals import WakeSignal
from statecore.store._turn_streams import (
    TurnStreamSnapshot,
    TurnStreamStore,
    check_stream_write,
)
from statecore.store.sql._engine import READ_ONLY_OPTION
from statecore.store.sql._events import NOTIFY_CHANNEL as EVENTS_CHANNEL
from statecore.store.sql._schema import TABLE_PREFIX, sessions, turn_streams
from statecore.store.sql._types import UtcDateTime
from statecore.store.sql._upsert import is_mysql

#: The channel PostgreSQL readers of turn streams LISTEN on.
STREAM_CHANNEL = TABLE_PREFIX + "turn_streams"

_s = turn_streams.c


def _session_pk(ref: SessionRef) -> Any:
    return (
        sa.select(sessions.c.id)
        .where(
            sessions.c.namespace == ref.namespace,
            sessions.c.agent_id == ref.agent_id,
            sessions.c.session_id == ref.session_id,
        )
        .scalar_subquery()
    )


def notify_payload(ref: SessionRef, turn_id: str) -> str:
    """Identifiers never contain '/'."""
    return f"{ref.namespace}/{ref.agent_id}/{ref.session_id}/{turn_id}"


class SqlTurnStreams(TurnStreamStore):
    def __init__(
        self,
        engine: AsyncEngine,
        dialect: str,
        clock: Callable[[], datetime],
        writer_lock: Callable[[], AbstractAsyncContextManager[object]],
    ) -> None:
        self._engine = engine
        self._dialect = dialect
        self._clock = clock
        self._writer_lock = writer_lock

    async def write(
        self,
        ref: SessionRef,
        turn_id: str,
        attempt: int,
        text: str,
        tool_calls: Sequence[ToolCall] = (),
    ) -> bool:
        text, calls, full = check_stream_write(ref, turn_id, attempt, text, tool_calls)
        calls_json = json.dumps([c.model_dump() for c in calls], separators=(",", ":"))
        values = {
            "attempt": attempt,
            "text": text,
            "tool_calls": calls_json,
            "full": int(full),
            "updated_at": self._clock(),
        }
        update = (
            turn_streams.update()
            .where(_s.session_pk == _session_pk(ref), _s.turn_id == turn_id, _s.attempt <= attempt)
            .values(**values)
        )
        async with self._writer_lock(), self._engine.begin() as conn:
            done = (await conn.execute(update)).rowcount > 0
            if not done:
                done = (await conn.execute(self._insert(ref, turn_id, values))).rowcount > 0
            if done and self._dialect == "postgresql":
                await conn.execute(
                    sa.select(sa.func.pg_notify(STREAM_CHANNEL, notify_payload(ref, turn_id)))
                )
            return done

    def _insert(self, ref: SessionRef, turn_id: str, values: dict[str, Any]) -> Any:
        source = sa.select(
            sessions.c.id,
            sa.literal(turn_id, sa.String()),
            sa.literal(values["attempt"], sa.Integer()),
            sa.literal(values["text"], sa.Text()),
            sa.literal(values["tool_calls"], sa.Text()),
            sa.literal(values["full"], sa.Integer()),
            sa.literal(values["updated_at"], UtcDateTime()),
        ).where(
            sessions.c.namespace == ref.namespace,
            sessions.c.agent_id == ref.agent_id,
            sessions.c.session_id == ref.session_id,
        )
        columns = ["session_pk", "turn_id", "attempt", "text", "tool_calls", "full", "updated_at"]
        if is_mysql(self._dialect):
            return mysql.insert(turn_streams).prefix_with("IGNORE").from_select(columns, source)
        module = postgresql if self._dialect == "postgresql" else sqlite
        statement: Any = module.insert(turn_streams).from_select(columns, source)
        return statement.on_conflict_do_nothing(index_elements=["session_pk", "turn_id"])

    async def read(self, ref: SessionRef, turn_id: str) -> TurnStreamSnapshot | None:
        check_ref(ref)
        validate_turn_id(turn_id)
        query = sa.select(_s.attempt, _s.text, _s.tool_calls, _s.full).where(
            _s.session_pk == _session_pk(ref), _s.turn_id == turn_id
        )
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
            async with conn.begin():
                row = (await conn.execute(query)).first()
        if row is None:
            return None
        calls = tuple(ToolCall.model_validate(c) for c in json.loads(row.tool_calls))
        return TurnStreamSnapshot(int(row.attempt), row.text, calls, bool(row.full))

    async def remove(self, ref: SessionRef, turn_id: str) -> bool:
        check_ref(ref)
        validate_turn_id(turn_id)
        delete = turn_streams.delete().where(
            _s.session_pk == _session_pk(ref), _s.turn_id == turn_id
        )
        async with self._writer_lock(), self._engine.begin() as conn:
            found = (await conn.execute(delete)).rowcount > 0
            if found and self._dialect == "postgresql":
                await conn.execute(
                    sa.select(sa.func.pg_notify(STREAM_CHANNEL, notify_payload(ref, turn_id)))
                )
            return found

    async def count(self, ref: SessionRef) -> int:
        check_ref(ref)
        query = sa.select(sa.func.count()).where(_s.session_pk == _session_pk(ref))
        async with self._engine.connect() as conn:
            conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
            async with conn.begin():
                return int((await conn.execute(query)).scalar_one())

    def changes(
        self, ref: SessionRef, turn_id: str, *, poll_interval: float
    ) -> AbstractAsyncContextManager[WakeSignal]:
        if self._dialect == "postgresql":
            check_ref(ref)
            validate_turn_id(turn_id)
            return _listen(self._engine, ref, turn_id)
        return super().changes(ref, turn_id, poll_interval=poll_interval)


class _Notified(WakeSignal):
    def __init__(self) -> None:
        self.woken = asyncio.Event()

    def arm(self) -> None:
        self.woken.clear()

    async def wait(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self.woken.wait(), min(seconds, STREAM_PUSH_FALLBACK_SECONDS))
        except TimeoutError:
            return False
        return True


@asynccontextmanager
async def _listen(engine: AsyncEngine, ref: SessionRef, turn_id: str) -> AsyncIterator[WakeSignal]:
    signal = _Notified()
    mine = notify_payload(ref, turn_id)

    def on_stream(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == mine:
            signal.woken.set()

    def on_commit(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == ref.namespace:  # a commit in the namespace: perhaps this turn's
            signal.woken.set()

    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        listener = raw.driver_connection
        assert listener is not None
        await listener.add_listener(STREAM_CHANNEL, on_stream)
        await listener.add_listener(EVENTS_CHANNEL, on_commit)
        try:
            yield signal
        finally:
            await listener.remove_listener(STREAM_CHANNEL, on_stream)
            await listener.remove_listener(EVENTS_CHANNEL, on_commit)
