"""aiosqlite connections that cost one trip to their thread per statement.

aiosqlite runs each sqlite3 call on a thread of its own connection and hands the result back
through the event loop. SQLAlchemy's aiosqlite adapter makes four such trips per statement:
open a cursor, execute, fetch the rows, close the cursor. Each trip wakes the connection's
thread and then the event loop, and resumes the awaiting coroutines; a turn ran ~60 of them,
which made SQLite turns cost measurably more CPU than PostgreSQL ones (bench/README.md).

Here a cursor does all four in one trip: it executes, reads every row and closes on the
connection's thread, then answers SQLAlchemy's later ``fetchall``/``close`` from what it
kept. That is what the stock adapter does too (it reads every row of a non-streaming result
at once), so results and errors are unchanged. A rollback with no transaction open, which
SQLAlchemy issues whenever a connection goes back to the pool, costs no trip at all.

Statecore never streams results from SQLite; a streaming (server-side) cursor here would
still work, holding its rows in memory like a buffered one.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

import aiosqlite

#: Rows aiosqlite hands out per trip when a result is iterated; its own default.
_ITER_CHUNK_SIZE = 64


class OneTripConnection(aiosqlite.Connection):
    """An aiosqlite connection whose cursors make one thread trip per statement."""

    def cursor(self) -> OneTripCursor:  # type: ignore[override]
        return OneTripCursor(self)

    async def rollback(self) -> None:
        # Returning a connection to the pool rolls it back even after a commit; with no
        # transaction open that is a no-op, so skip the trip. in_transaction is a flag read.
        connection = self._connection
        if connection is not None and not connection.in_transaction:
            return
        await super().rollback()


class OneTripCursor:
    """What SQLAlchemy's adapter needs of an aiosqlite cursor, one trip per execute."""

    def __init__(self, connection: OneTripConnection) -> None:
        self._connection = connection
        self._rows: list[Any] = []
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    async def __aenter__(self) -> OneTripCursor:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> OneTripCursor:
        return await self._run(sqlite3.Cursor.execute, sql, parameters or ())

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> OneTripCursor:
        return await self._run(sqlite3.Cursor.executemany, sql, parameters)

    async def _run(self, statement: Any, sql: str, parameters: Any) -> OneTripCursor:
        """One trip: ``statement(sqlite3 cursor, sql, parameters)`` on the connection's thread."""
        run = partial(_on_thread, self._connection._conn, statement, sql, parameters)
        self._take(await self._connection._execute(run))
        return self

    def _take(self, outcome: tuple[Any, list[Any], int, int | None]) -> None:
        self.description, self._rows, self.rowcount, self.lastrowid = outcome

    async def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        count = self.arraysize if size is None else size
        rows, self._rows = self._rows[:count], self._rows[count:]
        return rows

    async def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    async def close(self) -> None:
        self._rows = []


def _on_thread(
    connection: sqlite3.Connection, statement: Any, sql: str, parameters: Any
) -> tuple[Any, list[Any], int, int | None]:
    """On the connection's thread: run the statement, read all it returns, close."""
    cursor = connection.cursor()
    try:
        statement(cursor, sql, parameters)
        rows = cursor.fetchall() if cursor.description else []
        return cursor.description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


def connect(database: str, **kwargs: Any) -> OneTripConnection:
    """Like ``aiosqlite.connect``: a connection to await, its thread a daemon (a pooled
    connection left open must not keep the interpreter from exiting)."""
    connection = OneTripConnection(partial(sqlite3.connect, database, **kwargs), _ITER_CHUNK_SIZE)
    # aiosqlite >= 0.22 keeps its worker thread in ``_thread``; before, the connection was it.
    thread = getattr(connection, "_thread", connection)
    if not isinstance(thread, threading.Thread):
        raise TypeError(f"aiosqlite {aiosqlite.__version__} has no worker thread where expected")
    thread.daemon = True
    return connection
