"""SQLite connections run a locked transaction's statements without a trip to their thread
(statecore.store.sql._sqlite_driver), never make the event loop wait for a lock, and still
behave exactly like SQLAlchemy's aiosqlite driver: rows, row counts, inserted ids,
streaming, errors and rollbacks."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from statecore.core._models import Message, SessionRef
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from statecore.store.sql import _sqlite_driver as sqlite_driver
from statecore.store.sql._engine import READ_ONLY_OPTION, create_store_engine
from statecore.store.sql._sqlite_driver import InlineConnection

REF = SessionRef(namespace="trips", agent_id="agent", session_id="s1")


class TripCounter:
    """Trips to any SQLite connection's thread, and statements SQLAlchemy sends, while on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, engine: AsyncEngine) -> None:
        self.trips = 0
        self.statements = 0
        self.on = False
        real = InlineConnection._execute

        async def counted(connection: InlineConnection, fn: Any, *args: Any, **kw: Any) -> Any:
            self.trips += self.on
            return await real(connection, fn, *args, **kw)

        monkeypatch.setattr(InlineConnection, "_execute", counted)
        event.listen(engine.sync_engine, "before_cursor_execute", self._statement)

    def _statement(self, *_: Any) -> None:
        self.statements += self.on


class DriverTrips:
    """Trips of raw driver connections (no engine) to their threads."""

    def __init__(self) -> None:
        self.count = 0

    def watch(self, driver: InlineConnection) -> InlineConnection:
        real = driver._execute

        async def counted(fn: Any, *args: Any, **kw: Any) -> Any:
            self.count += 1
            return await real(fn, *args, **kw)

        driver._execute = counted  # type: ignore[method-assign]
        return driver


class LoopTicks:
    """Counts 10 ms ticks of the event loop from creation to ``stop()``: a loop that keeps
    ticking was not blocked meanwhile."""

    def __init__(self) -> None:
        self.ticks = 0
        self._task = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.ticks += 1

    def stop(self) -> None:
        self._task.cancel()


@pytest.fixture
async def engine(tmp_path: Any) -> AsyncIterator[AsyncEngine]:
    engine = create_store_engine(f"sqlite+aiosqlite:///{tmp_path / 'trips.db'}")
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
    try:
        yield engine
    finally:
        await engine.dispose()


async def test_a_turn_like_pair_of_transactions_costs_one_trip(
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
        async with store.transaction(read_only=True) as tx:
            await tx.conversation.tail(REF, max_messages=10)
        async with store.transaction() as tx:
            await tx.conversation.append(REF, "t1", [Message(role="user", content="hello")])
            await tx.kv.put(REF.kv_scope, "notes", "k", {"n": 1})
        counter.on = False
        async with store.transaction(read_only=True) as tx:
            assert [m.content for m in await tx.conversation.tail(REF, max_messages=10)] == [
                "hello"
            ]
            assert (await tx.kv.get(REF.kv_scope, "notes", "k")).value == {"n": 1}
    finally:
        await store.close()
    # The read's first SELECT takes its snapshot on the thread; every other statement, BEGIN
    # IMMEDIATE and the write's COMMIT included, runs in place (no checkpoint is due after one
    # write). The stock driver made ~4 trips per statement plus one for the pool's rollback.
    assert counter.statements >= 6
    assert counter.trips == 1


async def test_a_read_only_transaction_that_writes_sends_all_it_does_next_to_the_thread(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = TripCounter(monkeypatch, engine)
    async with engine.connect() as conn:
        conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
        counter.on = True
        async with conn.begin():
            trips = [counter.trips]
            for sql in (
                "SELECT count(*) FROM t",  # takes the snapshot: thread
                "SELECT count(*) FROM t",  # reads the snapshot: in place
                "INSERT INTO t (v) VALUES ('a')",  # may wait for the write lock: thread
                "SELECT count(*) FROM t",  # a transaction that may write: thread
            ):
                await conn.execute(text(sql))
                trips.append(counter.trips)
        counter.on = False
    assert [b - a for a, b in itertools.pairwise(trips)] == [1, 0, 1, 1]
    # BEGIN ran in place; the COMMIT of a transaction that may have written went to the thread.
    assert counter.trips == 4
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT v FROM t"))).scalars().all() == ["a"]


async def test_a_first_read_of_no_table_still_takes_the_snapshot(
    engine: AsyncEngine, tmp_path: Any
) -> None:
    async with engine.connect() as conn:
        conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
        async with conn.begin():
            assert await conn.scalar(text("SELECT 1")) == 1
            other = sqlite3.connect(tmp_path / "trips.db", isolation_level=None)
            other.execute("INSERT INTO t (v) VALUES ('after the snapshot')")
            other.close()
            # Read in place, from the snapshot the first read took.
            assert await conn.scalar(text("SELECT count(*) FROM t")) == 0
    async with engine.connect() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM t")) == 1


async def test_a_read_only_transaction_that_writes_waits_for_the_lock_on_the_thread(
    tmp_path: Any,
) -> None:
    path = tmp_path / "temp.db"
    engine = create_store_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 0.5})
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        ticker = LoopTicks()
        async with engine.connect() as conn:
            conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
            with pytest.raises(OperationalError, match="database is locked"):
                async with conn.begin():
                    # A write to a temporary table, then one that needs the write lock.
                    await conn.execute(text("CREATE TEMP TABLE scratch (a)"))
                    await conn.execute(text("INSERT INTO t (v) VALUES ('waits')"))
        ticker.stop()
        other.rollback()
        other.close()
        # The busy timeout ran out on the thread while the event loop went on.
        assert ticker.ticks >= 25
    finally:
        await engine.dispose()


async def test_commit_sent_as_sql_goes_to_the_thread(tmp_path: Any) -> None:
    driver = await sqlite_driver.connect(str(tmp_path / "raw.db"), isolation_level=None)
    try:
        await driver.cursor().execute("PRAGMA journal_mode = WAL")
        driver.wal = True  # as connect_in_wal_mode marks a connection in WAL mode
        trips = DriverTrips()
        trips.watch(driver)
        cursor = driver.cursor()
        await cursor.execute("CREATE TABLE t (v TEXT)")  # outside a transaction: thread
        await cursor.execute("BEGIN IMMEDIATE")  # in place, the lock being free
        await cursor.execute("INSERT INTO t VALUES ('x')")  # in place
        assert trips.count == 1
        await cursor.execute("COMMIT")  # may checkpoint: thread
        assert trips.count == 2
        assert driver.locks is sqlite_driver.Locks.NONE
        await cursor.execute("INSERT INTO t VALUES ('y')")  # outside a transaction: thread
        assert trips.count == 3
    finally:
        await driver.close()


async def test_a_writer_waits_for_another_connections_lock_on_the_thread(tmp_path: Any) -> None:
    path = tmp_path / "locked.db"
    engine = create_store_engine(f"sqlite+aiosqlite:///{path}")
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO t (v) VALUES ('first')")
        ticker = LoopTicks()
        asyncio.get_running_loop().call_later(0.4, other.commit)
        started = time.monotonic()
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES ('second')"))
            waited = time.monotonic() - started
            # The busy timeout tried in place at zero is back at the engine's own value.
            assert await conn.scalar(text("PRAGMA busy_timeout")) == 30000
        ticker.stop()
        other.close()
        assert waited >= 0.35
        # The event loop ran on while BEGIN IMMEDIATE waited for the lock.
        assert ticker.ticks >= 20
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all()
        assert rows == ["first", "second"]
    finally:
        await engine.dispose()


async def _write_commits(engine: AsyncEngine, commits: int) -> None:
    """``commits`` transactions, each adding a row of 12 KB (four pages or so)."""
    for n in range(commits):
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": f"{n:06d}" * 2000})


def _engine_setting(path: Any, pragma: str | None) -> AsyncEngine:
    """statecore's engine for ``path``, with a ``connect`` listener of the caller's own that
    sends ``pragma`` (after statecore's own settings)."""
    engine = create_store_engine(f"sqlite+aiosqlite:///{path}")
    if pragma is not None:

        def caller_setting(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(pragma)
            cursor.close()

        event.listen(engine.sync_engine, "connect", caller_setting)
    return engine


def _wal_pages(path: Any) -> int:
    wal = path.parent / f"{path.name}-wal"
    if not wal.exists():
        return 0
    with sqlite3.connect(path) as connection:
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    return int(wal.stat().st_size // page_size)


@pytest.mark.parametrize("threshold", [None, 128])
async def test_write_commits_run_in_place_and_the_wal_is_checkpointed_on_the_thread(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, threshold: int | None
) -> None:
    path = tmp_path / "wal.db"
    # A threshold of the caller's own, set as SQLite's: it becomes statecore's.
    setting = None if threshold is None else f"PRAGMA wal_autocheckpoint = {threshold}"
    engine = _engine_setting(path, setting)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
            # SQLite's own checkpoint is off: it would run inside a COMMIT made in place.
            assert await conn.scalar(text("PRAGMA wal_autocheckpoint")) == 0
            driver = (await conn.get_raw_connection()).driver_connection
            assert isinstance(driver, InlineConnection)
            assert driver.checkpoints.pages == (threshold or 1000)
        counter = TripCounter(monkeypatch, engine)
        counter.on = True
        await _write_commits(engine, 600)
        counter.on = False
        # 600 commits of ~2,500 pages in all: a few go to the thread to checkpoint, the rest
        # commit in place.
        assert 1 <= counter.trips <= 600 // 4
        # Without a checkpoint the WAL would hold every page written; with SQLite's own it
        # stays near the threshold. Here too.
        pages = threshold or 1000
        assert _wal_pages(path) <= 2 * pages + 64 < 2_400
        async with engine.connect() as conn:
            assert await conn.scalar(text("SELECT count(*) FROM t")) == 600
    finally:
        await engine.dispose()


async def test_a_pragma_sets_the_busy_timeout_restored_after_begin_and_counts_as_a_write(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with engine.connect() as conn:
        await conn.execute(text("PRAGMA busy_timeout = 1234"))
        await conn.commit()
        async with conn.begin():  # BEGIN IMMEDIATE tried in place at zero, then restored
            assert await conn.scalar(text("PRAGMA busy_timeout")) == 1234
    counter = TripCounter(monkeypatch, engine)
    async with engine.connect() as conn:
        conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
        async with conn.begin():
            await conn.execute(text("SELECT count(*) FROM t"))  # takes the snapshot
            await conn.execute(text("PRAGMA user_version = 7"))  # a write, on the thread
            counter.on = True
            await conn.execute(text("SELECT count(*) FROM t"))
            counter.on = False
        # After a PRAGMA the transaction may hold the write lock: no more reads in place.
        assert counter.trips == 1
        assert await conn.scalar(text("PRAGMA user_version")) == 7


async def test_a_commit_that_syncs_goes_to_the_thread(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine_setting(tmp_path / "full.db", "PRAGMA synchronous = FULL")
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
            assert await conn.scalar(text("PRAGMA synchronous")) == 2
        counter = TripCounter(monkeypatch, engine)
        counter.on = True
        await _write_commits(engine, 5)
        counter.on = False
        # Every COMMIT fsyncs the WAL at FULL: each one on the thread, none in place.
        assert counter.trips == 5
    finally:
        await engine.dispose()


async def test_a_threshold_of_zero_keeps_checkpoints_off_as_sqlite_would(tmp_path: Any) -> None:
    path = tmp_path / "nocheckpoint.db"
    engine = _engine_setting(path, "PRAGMA wal_autocheckpoint = 0")
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        await _write_commits(engine, 600)
        # Every page written is still in the WAL: nobody checkpointed.
        assert _wal_pages(path) >= 1200
    finally:
        await engine.dispose()


async def test_a_failed_checkpoint_leaves_the_commit_standing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    driver = await sqlite_driver.connect_in_wal_mode(str(tmp_path / "raw.db"), isolation_level=None)
    try:
        cursor = driver.cursor()
        await cursor.execute("CREATE TABLE t (v TEXT)")
        driver.checkpoints.every = 1  # the next write commit checkpoints
        original = sqlite_driver._checkpoint

        class FailingCheckpoint:
            """The sqlite3 connection, but a checkpoint fails as on a disk I/O error."""

            def __init__(self, connection: sqlite3.Connection) -> None:
                self.connection = connection

            def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
                if "wal_checkpoint" in sql:
                    raise sqlite3.OperationalError("disk I/O error")
                return self.connection.execute(sql, *args)

        monkeypatch.setattr(
            sqlite_driver,
            "_checkpoint",
            lambda connection, checkpoints, commits: original(
                FailingCheckpoint(connection), checkpoints, commits
            ),
        )
        await cursor.execute("BEGIN IMMEDIATE")
        await cursor.execute("INSERT INTO t VALUES ('kept')")
        with caplog.at_level("WARNING", logger=sqlite_driver.__name__):
            await driver.commit()
        assert "checkpoint failed" in caplog.text
        assert driver.locks is sqlite_driver.Locks.NONE
        assert driver.checkpoints.commits == 0  # the next one is tried after ``every`` more
        other = sqlite3.connect(tmp_path / "raw.db")
        assert other.execute("SELECT v FROM t").fetchall() == [("kept",)]
        other.close()
    finally:
        await driver.close()


async def test_connections_that_live_for_a_few_commits_still_checkpoint(tmp_path: Any) -> None:
    # No pool: every transaction opens a connection of its own and closes it. The database
    # file's commits are counted across connections, so the WAL stays near the threshold.
    path = tmp_path / "nopool.db"
    engine = create_store_engine(f"sqlite+aiosqlite:///{path}", poolclass=NullPool)
    keeper = sqlite3.connect(path, isolation_level=None)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        # A connection that has read the database in WAL mode keeps the WAL open: no
        # connection's close is the last one, which would checkpoint.
        assert keeper.execute("SELECT count(*) FROM t").fetchone() == (0,)
        await _write_commits(engine, 600)
        assert _wal_pages(path) <= 2 * 1000 + 64
    finally:
        keeper.close()
        await engine.dispose()


def _wal_header(path: str) -> bytes:
    """The WAL header's checkpoint sequence number and salts: they change exactly when a
    writer starts the WAL from its beginning (and syncs the header)."""
    try:
        with open(f"{path}-wal", "rb") as wal:
            return wal.read(24)[12:24]
    except FileNotFoundError:
        return b""


async def test_the_commit_that_restarts_the_wal_syncs_its_header_on_the_thread(
    tmp_path: Any,
) -> None:
    # After a checkpoint that copied the whole WAL, the next writer starts the WAL from its
    # beginning and syncs its header to disk: never on the event loop. Nor after the last
    # connection closed and took the WAL with it.
    path = str(tmp_path / "restart.db")
    trips = DriverTrips()

    async def opened() -> InlineConnection:
        driver = trips.watch(await sqlite_driver.connect_in_wal_mode(path, isolation_level=None))
        await driver.cursor().execute("PRAGMA synchronous = NORMAL")  # statecore's engine's
        return driver

    async def commit(driver: InlineConnection, rows: int) -> tuple[bool, bool]:
        """One write transaction of ``rows`` rows: (made a trip, restarted the WAL)."""
        cursor = driver.cursor()
        await cursor.execute("BEGIN IMMEDIATE")
        for n in range(rows):
            await cursor.execute("INSERT INTO t VALUES (?)", (str(n),))
        before, header = trips.count, _wal_header(path)
        await driver.commit()
        return trips.count > before, _wal_header(path) != header

    driver = await opened()
    try:
        await driver.cursor().execute("CREATE TABLE t (v TEXT)")
        outcomes = []
        for _ in range(160):  # a checkpoint after 16 commits, then every 64
            due = driver.checkpoints.due
            outcomes.append(await commit(driver, 1))
            if due:
                # A commit that writes nothing restarts nothing, and leaves the restart to
                # the next commit that writes.
                outcomes.append(await commit(driver, 0))
        restarts = [made_trip for made_trip, restarted in outcomes if restarted]
        assert len(restarts) >= 2  # the WAL was restarted after each checkpoint...
        assert all(restarts)  # ... always by a commit on the thread
        assert sum(made_trip for made_trip, _ in outcomes) < len(outcomes) // 2
    finally:
        await driver.close()
    assert _wal_header(path) == b""  # the last connection to close removed the WAL
    driver = await opened()
    try:
        assert await commit(driver, 1) == (True, True)  # a new WAL, started on the thread
        assert await commit(driver, 1) == (False, False)
    finally:
        await driver.close()


def test_a_busy_checkpoint_keeps_the_interval_and_tries_again() -> None:
    checkpoints = sqlite_driver.Checkpoints()
    checkpoints.pages = 1000
    checkpoints.committed(restarted=True)  # a commit on the thread that wrote rows
    assert not checkpoints.restarts
    for _ in range(15):
        checkpoints.committed(restarted=False)
    assert checkpoints.due
    commits = checkpoints.start()  # others see no checkpoint due while it runs...
    assert (commits, checkpoints.commits, checkpoints.due) == (16, 0, False)
    assert checkpoints.restarts  # ... and send their next commit to the thread
    checkpoints.checkpointed(commits, 0, 160)  # 10 pages a commit: every 64 commits (the cap)
    assert checkpoints.every == 64
    # Another connection was checkpointing: nothing is learned, the interval stays.
    checkpoints.checkpointed(64, 1, -1)
    assert checkpoints.every == 64
    checkpoints.checkpointed(1, 0, 500)  # 500 pages after one commit: checkpoint again soon
    assert checkpoints.every == 2
    checkpoints.committed(restarted=False)  # a commit that wrote nothing keeps the restart
    assert checkpoints.restarts


async def test_a_commit_sent_as_sql_counts_towards_the_next_checkpoint(tmp_path: Any) -> None:
    driver = await sqlite_driver.connect_in_wal_mode(str(tmp_path / "sql.db"), isolation_level=None)
    try:
        cursor = driver.cursor()
        await cursor.execute("CREATE TABLE t (v TEXT)")  # outside a transaction: a commit
        counted = driver.checkpoints.commits
        await cursor.execute("BEGIN IMMEDIATE")
        await cursor.execute("INSERT INTO t VALUES ('x')")
        await cursor.execute("COMMIT")
        await cursor.execute("SELECT count(*) FROM t")  # a read: not a commit
        assert driver.checkpoints.commits == counted + 1
    finally:
        await driver.close()


def _rollback_journal_database_with_its_write_lock_held(path: Any) -> sqlite3.Connection:
    """A database not yet in WAL mode, and a connection holding its write lock: SQLite
    refuses another connection's switch to WAL at once then, without waiting its busy
    timeout (what processes opening one new database together run into)."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    assert other.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t (v) VALUES ('first')")
    return other


async def test_the_switch_to_wal_waits_for_a_writer_instead_of_failing(tmp_path: Any) -> None:
    path = tmp_path / "new.db"
    other = _rollback_journal_database_with_its_write_lock_held(path)
    engine = create_store_engine(f"sqlite+aiosqlite:///{path}")
    try:
        ticker = LoopTicks()
        asyncio.get_running_loop().call_later(0.3, other.commit)
        started = time.monotonic()
        async with engine.connect() as conn:
            waited = time.monotonic() - started
            assert await conn.scalar(text("PRAGMA journal_mode")) == "wal"
            driver = (await conn.get_raw_connection()).driver_connection
            assert isinstance(driver, InlineConnection) and driver.wal
        ticker.stop()
        assert waited >= 0.25
        assert ticker.ticks >= 15  # it waited without blocking the event loop
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES ('second')"))
            rows = (await conn.execute(text("SELECT v FROM t ORDER BY id"))).scalars().all()
        assert rows == ["first", "second"]
    finally:
        other.close()
        await engine.dispose()


async def test_the_switch_to_wal_fails_typed_once_the_busy_timeout_has_passed(
    tmp_path: Any,
) -> None:
    path = tmp_path / "held-new.db"
    other = _rollback_journal_database_with_its_write_lock_held(path)
    engine = create_store_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 0.2})
    try:
        started = time.monotonic()
        with pytest.raises(OperationalError, match="database is locked") as refused:
            async with engine.connect():
                pass
        assert 0.15 <= time.monotonic() - started < 5
        notes = getattr(refused.value.orig, "__notes__", [])
        assert any("to WAL mode" in note and "0.2 s" in note for note in notes), notes
        other.commit()
        async with engine.connect() as conn:  # the next connection switches it
            assert await conn.scalar(text("PRAGMA journal_mode")) == "wal"
            assert (await conn.execute(text("SELECT v FROM t"))).scalars().all() == ["first"]
    finally:
        other.close()
        await engine.dispose()


async def test_a_lock_held_past_the_busy_timeout_fails_typed_and_the_connection_recovers(
    tmp_path: Any,
) -> None:
    path = tmp_path / "held.db"
    engine = create_store_engine(
        f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 0.2}, pool_size=1, max_overflow=0
    )
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(OperationalError, match="database is locked"):
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO t (v) VALUES ('refused')"))
        other.rollback()
        other.close()
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO t (v) VALUES ('after')"))
            assert await conn.scalar(text("PRAGMA busy_timeout")) == 200
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT v FROM t"))).scalars().all() == ["after"]
    finally:
        await engine.dispose()


async def test_a_call_still_on_the_thread_makes_the_next_statement_queue_behind_it(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = TripCounter(monkeypatch, engine)
    async with engine.begin() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        assert isinstance(driver, InlineConnection)
        finished: list[float] = []

        def slow() -> None:
            time.sleep(0.3)
            finished.append(time.monotonic())

        # A task cancelled while it awaits a trip leaves the call running on the thread.
        waiting = asyncio.create_task(driver._execute(slow))
        await asyncio.sleep(0.05)
        waiting.cancel()
        counter.on = True
        await conn.execute(text("INSERT INTO t (v) VALUES ('queued')"))
        assert finished and counter.trips == 1
        await conn.execute(text("INSERT INTO t (v) VALUES ('in place')"))
        assert counter.trips == 1
        counter.on = False
    async with engine.connect() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM t")) == 2


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
    assert isinstance(driver, InlineConnection)
    thread = getattr(driver, "_thread", driver)
    assert isinstance(thread, threading.Thread) and thread.daemon
