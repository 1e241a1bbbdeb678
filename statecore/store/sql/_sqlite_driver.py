"""aiosqlite connections that leave their thread out of a transaction's statements.

aiosqlite runs each sqlite3 call on a thread of its own connection and hands the result back
through the event loop. One trip wakes the connection's thread, then the event loop through
its self-pipe, then the awaiting coroutine: about 0.1 ms of CPU, three times what SQLAlchemy
and SQLite themselves spend on a small indexed statement. A turn made ~16 of them
(bench/README.md at 74815d7, "SQLite statements without the thread trip").

The thread is there so that a statement which waits for another connection does not stop
the event loop. Inside a transaction that already holds its locks, none does:

- ``BEGIN IMMEDIATE`` took the database's write lock, and in WAL mode a writer never waits
  for readers.
- A deferred ``BEGIN`` whose first read has been answered holds a WAL snapshot, and later
  reads of that snapshot wait for nobody.

So the statements of the first, and the SELECTs of the second, run here, on the event loop's
thread, and cost no trip. They read and write pages through SQLite's cache and the operating
system's, however many: a very large read blocks the event loop for as long as it takes, as
building its rows did on the thread too. What can wait for another connection, or run a WAL
checkpoint, keeps the trip:

- ``BEGIN IMMEDIATE`` is first tried here with the busy timeout at zero: when another
  connection holds the write lock it fails at once, leaves no transaction open, and is sent
  to the thread to wait there with the connection's own busy timeout.
- A deferred transaction's first read, which takes the snapshot (followed in the same trip
  by a read of the schema version, so that a first ``SELECT 1`` takes it too).
- Anything but a SELECT in a deferred transaction, and from then on all it does: it may be
  waiting for the write lock, or hold it. The kind of a statement is read from its first
  word, and only ``BEGIN IMMEDIATE`` is trusted to have taken the write lock.
- A write transaction's ROLLBACK; COMMIT, END and ROLLBACK sent as SQL.
- Everything outside a transaction: schema changes, PRAGMAs, the pool's checks.

A ``BEGIN IMMEDIATE`` transaction's COMMIT runs here too. In WAL mode at ``synchronous =
NORMAL`` (statecore's setting) a commit appends the transaction's pages to the WAL file and
waits for nobody, with two exceptions, both kept on the thread:

- SQLite's automatic checkpoint, which runs inside a COMMIT once the WAL reaches
  ``wal_autocheckpoint`` pages: it copies pages into the database file and syncs both. These
  connections turn it off and run the same checkpoint themselves (``Checkpoints``): every so
  many write commits of this process to the database, one COMMIT goes to the thread and a
  ``PRAGMA wal_checkpoint(PASSIVE)`` follows it there. The pages between two
  checkpoints stay near the threshold the connection had (SQLite's default, 1000 pages,
  unless a ``connect`` listener set another with ``PRAGMA wal_autocheckpoint``, which is
  then taken as the threshold instead; 0 keeps checkpoints off, as SQLite would).
- The first commit that writes rows after a checkpoint that copied the whole WAL, or after
  a connection opened (the last connection to close removes the WAL), starts writing the
  WAL from its beginning again, and syncs the WAL's header to disk as it does: that commit
  goes to the thread too. (A checkpoint run by another process can make this process's next COMMIT
  that one without this process knowing; it then syncs the header in place, once.)

At ``synchronous`` FULL or EXTRA, set by a ``connect`` listener of your own, every COMMIT
syncs the WAL, and goes to the thread. The settings are read again after every PRAGMA sent
through the connection's cursor (SQLAlchemy's path); one sent through aiosqlite's own
``execute`` or ``executescript`` on the raw connection is not seen.

Results come back as the stock adapter gives them: each execute reads every row and closes
its sqlite3 cursor at once, then answers SQLAlchemy's ``fetchall``/``close`` from what it
kept, as the stock adapter does for a non-streaming result. Errors keep their types. A
rollback with no transaction open, which SQLAlchemy issues whenever a connection goes back
to the pool, costs nothing.

The sqlite3 connection is used from two threads, one at a time: a statement runs here only
when no call of this connection is queued or running on its thread (a task cancelled while
awaiting a trip leaves that call running, and the next statement queues behind it).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import Any

import aiosqlite

log = logging.getLogger(__name__)

#: Rows aiosqlite hands out per trip when a result is iterated; its own default.
_ITER_CHUNK_SIZE = 64
#: SQLite's primary result code for "another connection holds the lock".
_SQLITE_BUSY = 5
#: Statements that end a transaction, sent as SQL: they go to the thread, as commit() does.
_ENDS = frozenset({"COMMIT", "END"})
#: sqlite3.connect's own default busy timeout, in seconds.
_SQLITE3_DEFAULT_TIMEOUT = 5.0
#: Write commits between two checkpoints before the first checkpoint has measured how
#: many WAL pages a commit adds, and the most afterwards (so that commits growing larger
#: than the measured ones cannot take the WAL far past its threshold).
_FIRST_CHECKPOINT_EVERY = 16
_MAX_CHECKPOINT_EVERY = 64
#: ``PRAGMA synchronous`` levels: OFF 0, NORMAL 1, FULL 2, EXTRA 3.
_SYNCHRONOUS_NORMAL = 1
_SETS_AUTOCHECKPOINT = re.compile(r"wal_autocheckpoint\s*[=(]", re.IGNORECASE)
#: First and longest pause between two tries of the switch to WAL mode.
_WAL_RETRY_FIRST_SECONDS = 0.005
_WAL_RETRY_MAX_SECONDS = 0.1

Outcome = tuple[Any, list[Any], int, int | None]


class Locks(enum.Enum):
    """What the connection's open transaction holds, as far as running statements here goes."""

    NONE = "no transaction"
    DEFERRED = "deferred BEGIN, nothing read yet"
    SNAPSHOT = "a WAL read snapshot, nothing written"
    #: A deferred transaction ran something other than a read: it may hold the write lock,
    #: or may have to wait for it. Everything it does from here on goes to the thread.
    UNKNOWN = "a deferred transaction that may write"
    WRITE = "the write lock, taken by BEGIN IMMEDIATE"


class Checkpoints:
    """When the connections of this process to one database file checkpoint its WAL, their
    automatic checkpoint being off (module doc); one for each file (``for_database``), so a
    connection that lives for a few commits only still counts towards the next checkpoint.

    SQLite's own rule is "after a commit that leaves ``pages`` or more in the WAL"; the WAL's
    length is not known here without a trip, so the rule becomes "every ``every`` write
    commits", and each checkpoint sets ``every`` from what it found: the WAL held
    ``wal_pages`` pages after ``commits`` commits (commits of other processes to the same
    file add to the WAL too, so the estimate errs towards checkpointing early).

    Commits are serialised by SQLite's write lock, but counted from the event loop's thread
    and from the connections' threads: the counters change under a lock."""

    def __init__(self) -> None:
        #: The WAL length that calls for a checkpoint; 0: never checkpoint.
        self.pages = 0
        self.every = _FIRST_CHECKPOINT_EVERY
        self.commits = 0
        #: The next commit that writes rows may start the WAL from its beginning (module
        #: doc), so it goes to the thread. Set when a connection opens (the last one to
        #: close may have removed the WAL) and when a checkpoint starts; cleared by a commit
        #: on the thread that wrote rows.
        self.restarts = True
        self._lock = threading.Lock()

    @property
    def due(self) -> bool:
        """Whether the next write commit should checkpoint after it."""
        return self.pages > 0 and self.commits + 1 >= self.every

    def committed(self, *, restarted: bool) -> None:
        with self._lock:
            self.commits += 1
            if restarted:
                self.restarts = False

    def start(self) -> int:
        """A checkpoint is about to run: the commits it follows, counted from zero again at
        once, so that other connections do not start one too."""
        with self._lock:
            commits, self.commits = self.commits, 0
            self.restarts = True
            return commits

    def checkpointed(self, commits: int, busy: int, wal_pages: int) -> None:
        """What ``PRAGMA wal_checkpoint(PASSIVE)`` found after ``commits`` commits."""
        if busy or wal_pages < 0:
            # Another connection was checkpointing, or it failed: nothing learned; tried
            # again after ``every`` more commits, as SQLite's own would be after the next.
            return
        per_commit = max(wal_pages, 1) / max(commits, 1)
        with self._lock:
            self.every = max(1, min(_MAX_CHECKPOINT_EVERY, int(self.pages / per_commit)))

    @classmethod
    def for_database(cls, database: str) -> Checkpoints:
        key = database if database.startswith("file:") else os.path.realpath(database)
        return _CHECKPOINTS.setdefault(key, cls())


#: Checkpoints of every database file this process has opened, by its real path.
_CHECKPOINTS: dict[str, Checkpoints] = {}


class InlineConnection(aiosqlite.Connection):
    """An aiosqlite connection whose locked transactions run their statements in place."""

    def __init__(self, connector: Callable[[], sqlite3.Connection], iter_chunk_size: int):
        super().__init__(connector, iter_chunk_size)
        self.locks = Locks.NONE
        #: Set once the connection runs in WAL mode: the reasoning above holds only there.
        self.wal = False
        #: The connection's busy timeout, restored after each BEGIN IMMEDIATE tried here.
        self.busy_timeout_ms = 0
        #: Set with ``wal``: the checkpoints of its database file, which this connection
        #: runs on its thread once it has turned SQLite's automatic checkpoint off
        #: (``checkpoints_taken``).
        self.checkpoints = Checkpoints()
        self.checkpoints_taken = False
        #: ``total_changes`` when the open transaction began (or the last commit was counted).
        self._changes_mark = 0
        #: Set when ``PRAGMA synchronous`` is above NORMAL: every COMMIT then syncs the WAL
        #: to disk, and goes to the thread.
        self.commit_syncs = False
        # Calls handed to the thread, and calls it finished: each counter is written by one
        # thread only, so their difference is the calls still queued or running.
        self._sent = 0
        self._finished = 0

    def cursor(self) -> InlineCursor:  # type: ignore[override]
        return InlineCursor(self)

    async def _execute(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        call = partial(fn, *args, **kwargs)

        def counted() -> Any:
            try:
                return call()
            finally:
                self._finished += 1

        self._sent += 1
        return await super()._execute(counted)

    def _here(self) -> sqlite3.Connection | None:
        """The sqlite3 connection, when this thread may use it now: no call of it is on
        the thread, and the transaction the lock state describes is still open."""
        sqlite = self._connection
        if sqlite is None or not self.wal or self._sent != self._finished:
            return None
        if not sqlite.in_transaction:
            # Ended by a statement (COMMIT as SQL) or by SQLite itself (some errors roll
            # back); either way nothing is held any more.
            self.locks = Locks.NONE
        return sqlite

    async def run(self, statement: Any, sql: str, parameters: Any) -> Outcome:
        """``statement(sqlite3 cursor, sql, parameters)``, here when nothing can make it
        wait and on the connection's thread otherwise."""
        words = sql.lstrip()[:24].upper().split(None, 2)
        verb = words[0] if words else ""
        ends = verb in _ENDS or (verb == "ROLLBACK" and "TO" not in words[1:])
        raw = self._connection
        if raw is not None and not raw.in_transaction:
            # Rows changed from here on are the coming transaction's (``commit``), or this
            # statement's if it runs alone.
            self._changes_mark = raw.total_changes
        if verb == "PRAGMA" and self.checkpoints_taken:
            # It may set the busy timeout or the checkpoint threshold: read both again.
            outcome = await self._execute(
                _run_keeping_settings, self, self._conn, statement, sql, parameters
            )
            if self.locks in (Locks.DEFERRED, Locks.SNAPSHOT):
                self.locks = Locks.UNKNOWN  # a PRAGMA may write (user_version, say)
            return outcome
        sqlite = self._here()
        if sqlite is not None and not ends:
            if verb == "BEGIN":
                deferred = _begins_deferred(words)
                # A deferred BEGIN touches no file: it only ends autocommit.
                outcome = (
                    _run_statement(sqlite, statement, sql, parameters)
                    if deferred
                    else _begin_without_waiting(
                        sqlite, statement, sql, parameters, self.busy_timeout_ms
                    )
                )
                if outcome is not None:
                    self.locks = Locks.DEFERRED if deferred else Locks.WRITE
                    return outcome
            elif self.locks is Locks.WRITE or (self.locks is Locks.SNAPSHOT and verb == "SELECT"):
                return _run_statement(sqlite, statement, sql, parameters)
        if verb == "SELECT" and self.locks is Locks.DEFERRED:
            # The first read takes the snapshot, unless it reads no table (SELECT 1): the
            # PRAGMA reads the schema, which takes it whatever the SELECT did.
            outcome = await self._execute(
                _read_taking_snapshot, self._conn, statement, sql, parameters
            )
            self.locks = Locks.SNAPSHOT
            return outcome
        ended_writes = ends and self.locks in (Locks.WRITE, Locks.UNKNOWN)
        outcome = await self._execute(_run_statement, self._conn, statement, sql, parameters)
        # A COMMIT sent as SQL, or a write outside a transaction: it committed there.
        committed = verb != "ROLLBACK" and not self._conn.in_transaction
        if self.checkpoints_taken and committed and (ended_writes or self._changed_rows()):
            await self._committed_on_thread()
        if ends:
            self.locks = Locks.NONE
        elif verb == "BEGIN":
            self.locks = Locks.DEFERRED if _begins_deferred(words) else Locks.WRITE
        elif self.locks in (Locks.DEFERRED, Locks.SNAPSHOT) and verb != "SELECT":
            self.locks = Locks.UNKNOWN
        return outcome

    async def commit(self) -> None:
        sqlite = self._here()
        wrote = self.locks in (Locks.WRITE, Locks.UNKNOWN)
        checkpoints = self.checkpoints
        if (
            sqlite is not None
            and self.locks is Locks.WRITE
            and self.checkpoints_taken
            and not (self.commit_syncs or checkpoints.restarts or checkpoints.due)
        ):
            # Appends the pages to the WAL and waits for nobody (module doc).
            sqlite.commit()
            checkpoints.committed(restarted=False)
            self.locks = Locks.NONE
            return
        await self._end(sqlite, sqlite3.Connection.commit, super().commit)
        if wrote and self.checkpoints_taken:
            await self._committed_on_thread()

    def _changed_rows(self) -> bool:
        """Whether rows changed since the open transaction began (``_changes_mark``)."""
        return self._conn.total_changes != self._changes_mark

    async def _committed_on_thread(self) -> None:
        """Count a write commit that ran on the thread; checkpoint there if one is due. If it
        changed rows it wrote pages, and any restart of the WAL was its own (a commit that
        wrote nothing leaves the restart to the next one)."""
        wrote_rows = self._changed_rows()
        self._changes_mark = self._conn.total_changes
        checkpoints = self.checkpoints
        due = checkpoints.due
        checkpoints.committed(restarted=wrote_rows)
        if due:
            commits = checkpoints.start()
            await self._execute(_checkpoint, self._conn, checkpoints, commits)

    async def rollback(self) -> None:
        # Returning a connection to the pool rolls it back even after a commit; with no
        # transaction open that is a no-op, so skip the trip. in_transaction is a flag read.
        sqlite = self._here()
        if sqlite is not None and not sqlite.in_transaction:
            return
        await self._end(sqlite, sqlite3.Connection.rollback, super().rollback)

    async def _end(
        self,
        sqlite: sqlite3.Connection | None,
        here: Callable[[sqlite3.Connection], None],
        on_thread: Callable[[], Awaitable[None]],
    ) -> None:
        """End the transaction: here when it only read (ending a read that wrote nothing
        releases a snapshot: no checkpoint, no wait), on the thread otherwise."""
        if sqlite is not None and self.locks in (Locks.DEFERRED, Locks.SNAPSHOT):
            here(sqlite)
        else:
            await on_thread()
        self.locks = Locks.NONE


class InlineCursor:
    """What SQLAlchemy's adapter needs of an aiosqlite cursor, at most one trip per execute."""

    def __init__(self, connection: InlineConnection) -> None:
        self._connection = connection
        self._rows: list[Any] = []
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> InlineCursor:
        return self._take(await self._connection.run(sqlite3.Cursor.execute, sql, parameters or ()))

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]]) -> InlineCursor:
        return self._take(await self._connection.run(sqlite3.Cursor.executemany, sql, parameters))

    def _take(self, outcome: Outcome) -> InlineCursor:
        self.description, self._rows, self.rowcount, self.lastrowid = outcome
        return self

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


def _run_statement(
    connection: sqlite3.Connection, statement: Any, sql: str, parameters: Any
) -> Outcome:
    """Run the statement, read all it returns, close its cursor."""
    cursor = connection.cursor()
    try:
        statement(cursor, sql, parameters)
        rows = cursor.fetchall() if cursor.description else []
        return cursor.description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


def _read_taking_snapshot(
    connection: sqlite3.Connection, statement: Any, sql: str, parameters: Any
) -> Outcome:
    """A deferred transaction's first read, and then the schema version: a read of the
    database file, so the transaction holds its WAL snapshot from here on."""
    outcome = _run_statement(connection, statement, sql, parameters)
    connection.execute("PRAGMA main.schema_version").fetchone()
    return outcome


def _begins_deferred(words: list[str]) -> bool:
    """Whether a BEGIN (its first words, upper case) takes no lock until its first read."""
    return len(words) == 1 or words[1] in ("DEFERRED", "TRANSACTION")


def _begin_without_waiting(
    connection: sqlite3.Connection, statement: Any, sql: str, parameters: Any, timeout_ms: int
) -> Outcome | None:
    """BEGIN IMMEDIATE (or EXCLUSIVE) here with the busy timeout at zero; None if another
    connection holds the lock it asks for (then nothing was begun, and the caller sends it
    to the thread to wait there). ``timeout_ms``: the connection's busy timeout, set again
    afterwards."""
    connection.execute("PRAGMA busy_timeout = 0")
    try:
        return _run_statement(connection, statement, sql, parameters)
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF != _SQLITE_BUSY or connection.in_transaction:
            raise
        return None
    finally:
        connection.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")


def _checkpoint(connection: sqlite3.Connection, checkpoints: Checkpoints, commits: int) -> None:
    """The checkpoint SQLite would have run inside the last COMMIT (PASSIVE: it copies what
    no reader still needs and waits for nobody), after ``commits`` commits."""
    try:
        busy, wal_pages, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error:
        # The commit stands; the checkpoint is tried again later (``checkpointed``).
        log.warning("SQLite WAL checkpoint failed; tried again later", exc_info=True)
        return
    checkpoints.checkpointed(commits, busy, wal_pages)


def _take_settings(
    owner: InlineConnection, connection: sqlite3.Connection, *, checkpoint: bool = True
) -> None:
    """Read the busy timeout, the sync level and the journal mode; with ``checkpoint``, also
    the automatic checkpoint's threshold, and turn it off (module doc)."""
    (owner.busy_timeout_ms,) = connection.execute("PRAGMA busy_timeout").fetchone()
    (synchronous,) = connection.execute("PRAGMA synchronous").fetchone()
    owner.commit_syncs = synchronous > _SYNCHRONOUS_NORMAL
    # A PRAGMA journal_mode may have left WAL mode: then nothing runs in place any more.
    (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
    owner.wal = str(mode).lower() == "wal"
    if not checkpoint:
        return
    (pages,) = connection.execute("PRAGMA wal_autocheckpoint").fetchone()
    if pages > 0:
        connection.execute("PRAGMA wal_autocheckpoint = 0")
    owner.checkpoints.pages = max(pages, 0)
    owner.checkpoints_taken = True


def _run_keeping_settings(
    owner: InlineConnection,
    connection: sqlite3.Connection,
    statement: Any,
    sql: str,
    parameters: Any,
) -> Outcome:
    """A PRAGMA, then the settings it may have changed taken again. Only a PRAGMA that sets
    ``wal_autocheckpoint`` changes the threshold: a query of it reads the 0 set here."""
    outcome = _run_statement(connection, statement, sql, parameters)
    _take_settings(owner, connection, checkpoint=_SETS_AUTOCHECKPOINT.search(sql) is not None)
    return outcome


async def connect_in_wal_mode(database: str, **kwargs: Any) -> InlineConnection:
    """A connection (``connect``) whose database is in WAL mode, switched there if it was
    not; its ``wal`` flag says whether the switch held (a database on a file system without
    shared memory may refuse it, and stays in its old mode).

    SQLite refuses the switch at once, without waiting its busy timeout, while another
    connection holds the write lock of a database not yet in WAL mode: several processes
    opening one new database together meet exactly that. The switch is tried again, with
    growing pauses, until the connection's busy timeout has passed, then fails as SQLite
    failed it."""
    connection = connect(database, **kwargs)
    await connection  # starts its thread, which opens the database
    wait = float(kwargs.get("timeout", _SQLITE3_DEFAULT_TIMEOUT))
    try:
        connection.wal = await _switch_to_wal(connection, wait)
        if connection.wal:
            connection.checkpoints = Checkpoints.for_database(database)
            await connection._execute(_take_settings, connection, connection._conn)
            # The last connection to close may have removed the WAL with it: a new one is
            # started by the next write, which syncs its header.
            connection.checkpoints.restarts = True
    except sqlite3.OperationalError as exc:
        await connection.close()
        if exc.sqlite_errorcode & 0xFF == _SQLITE_BUSY:
            # SQLite's message names no wait; the caller's log should say what it was.
            exc.add_note(
                f"statecore waited {wait:g} s (the connection's busy timeout) to switch "
                f"{database} to WAL mode; another connection held its write lock throughout"
            )
        raise
    except BaseException:
        await connection.close()
        raise
    return connection


async def _switch_to_wal(connection: InlineConnection, wait: float) -> bool:
    deadline = time.monotonic() + wait
    pause = _WAL_RETRY_FIRST_SECONDS
    while True:
        try:
            _, rows, _, _ = await connection.run(
                sqlite3.Cursor.execute, "PRAGMA journal_mode = WAL", ()
            )
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != _SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, _WAL_RETRY_MAX_SECONDS)
            continue
        return bool(rows) and str(rows[0][0]).lower() == "wal"


def connect(database: str, **kwargs: Any) -> InlineConnection:
    """Like ``aiosqlite.connect``: a connection to await, its thread a daemon (a pooled
    connection left open must not keep the interpreter from exiting)."""
    # Used from the event loop's thread too, never at the same time (see the module's doc).
    kwargs["check_same_thread"] = False
    connection = InlineConnection(partial(sqlite3.connect, database, **kwargs), _ITER_CHUNK_SIZE)
    # aiosqlite >= 0.22 keeps its worker thread in ``_thread``; before, the connection was it.
    thread = getattr(connection, "_thread", connection)
    if not isinstance(thread, threading.Thread):
        raise TypeError(f"aiosqlite {aiosqlite.__version__} has no worker thread where expected")
    thread.daemon = True
    return connection
