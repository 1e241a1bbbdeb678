"""Transient conflicts under real concurrency.

Writers of one session that touch its header and its KV rows in opposite orders queue on the
header row instead of deadlocking (the SQL backend's lock order). A session or key that does
not exist yet has no row to queue on, so racing creators can still deadlock on MariaDB and
PostgreSQL; ``run_transaction`` runs the loser again and every writer's work lands once.
Each writer uses its own store (its own engine, connections and transactions).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from statecore.core._errors import InvalidLimitError, RevisionConflictError
from statecore.core._models import KVEntry, KVScope, SessionRef
from statecore.store import MemoryStateStore, StateStore, StoreTransaction, run_transaction
from statecore.store._base import RestartTransaction
from statecore.store._migrate import upgrade_database
from statecore.store._retry import DEFAULT_ATTEMPTS
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database
from tests.store.helpers import hold_write_lock, user

SERVERS = [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]
SQL_DIALECTS = [*SERVERS, pytest.param("sqlite")]
WRITERS = 8


@pytest.fixture
async def migrated_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "conflict") as url:
        await upgrade_database(url)
        yield url


#: PostgreSQL looks for deadlocks after deadlock_timeout (1 s by default); MariaDB at once.
#: A shorter wait keeps these races quick and changes nothing else.
_FAST_DEADLOCK_CHECK = {"server_settings": {"deadlock_timeout": "50ms"}}


async def _stores(url: str, count: int, **engine_kwargs: Any) -> list[SqlStateStore]:
    if url.startswith("postgresql"):
        engine_kwargs.setdefault("connect_args", _FAST_DEADLOCK_CHECK)
    return [await SqlStateStore.connect(url, **engine_kwargs) for _ in range(count)]


async def _close(stores: list[SqlStateStore]) -> None:
    for store in stores:
        await store.close()


async def _race(racers: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Start every racer at the same moment; their results (or errors), in order."""
    start = asyncio.Event()

    async def run(racer: Callable[[], Awaitable[Any]]) -> Any:
        await start.wait()
        return await racer()

    tasks = [asyncio.create_task(run(racer)) for racer in racers]
    start.set()
    return await asyncio.gather(*tasks, return_exceptions=True)


def _writer(ref: SessionRef, number: int) -> Callable[[StoreTransaction], Awaitable[None]]:
    """One writer's work on a session: its own message, its own key, a shared counter key and
    the shared token usage. Even writers start at the session, odd ones at its KV rows."""

    async def session_part(tx: StoreTransaction) -> None:
        await tx.sessions.ensure(ref)
        await tx.conversation.append(ref, f"w{number}", [user(f"from writer {number}")])
        await tx.orchestration.add_token_usage(ref, 1, 0)

    async def kv_part(tx: StoreTransaction) -> None:
        await tx.kv.put(ref.kv_scope, "shared", "hits", number)
        await tx.kv.put(ref.kv_scope, "writers", f"w{number}", number, expected_revision=0)

    async def work(tx: StoreTransaction) -> None:
        first, second = (session_part, kv_part) if number % 2 == 0 else (kv_part, session_part)
        await first(tx)
        await second(tx)

    return work


async def _assert_each_writer_landed_once(store: StateStore, ref: SessionRef, writers: int) -> None:
    async with store.transaction() as tx:
        info = await tx.sessions.get(ref)
        log = await tx.conversation.messages(ref)
        hits = await tx.kv.get(ref.kv_scope, "shared", "hits")
        mine = [await tx.kv.get(ref.kv_scope, "writers", f"w{n}") for n in range(writers)]
        orchestration = await tx.orchestration.get(ref)
    assert info is not None and info.message_count == writers
    assert sorted(m.turn_id for m in log) == sorted(f"w{n}" for n in range(writers))
    assert [m.seq for m in log] == list(range(1, writers + 1))
    # One revision per landed write: a rolled-back attempt left nothing behind.
    assert hits is not None and hits.revision == writers
    assert [(e.value, e.revision) for e in mine if e is not None] == [
        (n, 1) for n in range(writers)
    ]
    assert orchestration is not None
    assert orchestration.cumulative_token_usage.prompt_tokens == writers


@dataclass
class _Crossing:
    #: Per writer: None, or what its run_transaction raised.
    outcomes: list[Any]
    #: Per writer: how many times its work ran.
    runs: list[int]
    x: KVEntry | None
    y: KVEntry | None


async def _writers_crossing_on_x_and_y(
    stores: list[SqlStateStore], scope: KVScope, *, attempts: int = DEFAULT_ATTEMPTS
) -> _Crossing:
    """A deadlock made on purpose: writer 0 puts x then y, writer 1 puts y then x (each with
    ``run_transaction`` on its own store), and neither takes its second key before both hold
    their first. Each writes its number; x and y start at -1."""
    both_hold_one = asyncio.Barrier(2)
    runs = [0, 0]

    def crossing(number: int, first: str, second: str):
        async def work(tx: StoreTransaction) -> None:
            runs[number] += 1
            await tx.kv.put(scope, "b", first, number)
            # A victim run again must not wait: its rival passed the barrier and will not return.
            if runs[number] == 1:
                await both_hold_one.wait()
            await tx.kv.put(scope, "b", second, number)

        return work

    async with stores[0].transaction() as tx:
        await tx.kv.put(scope, "b", "x", -1)
        await tx.kv.put(scope, "b", "y", -1)
    outcomes = await asyncio.gather(
        run_transaction(stores[0], crossing(0, "x", "y"), attempts=attempts),
        run_transaction(stores[1], crossing(1, "y", "x"), attempts=attempts),
        return_exceptions=True,
    )
    async with stores[0].transaction() as tx:
        x = await tx.kv.get(scope, "b", "x")
        y = await tx.kv.get(scope, "b", "y")
    return _Crossing(outcomes=outcomes, runs=runs, x=x, y=y)


@pytest.mark.parametrize("migrated_url", SERVERS, indirect=True)
async def test_opposite_order_writers_of_an_existing_session_do_not_deadlock(
    migrated_url: str,
) -> None:
    # Plain transactions, no retries: KV writes queue on the session's header row first, the
    # order appends take, so the two orders cannot wait for each other.
    stores = await _stores(migrated_url, WRITERS)
    refs = [SessionRef(namespace="order", agent_id="a", session_id=f"s{i}") for i in range(4)]

    def plain(store: SqlStateStore, number: int, ref: SessionRef):
        async def once() -> None:
            async with store.transaction() as tx:
                await _writer(ref, number)(tx)

        return once

    try:
        for ref in refs:
            async with stores[0].transaction() as tx:
                await tx.sessions.ensure(ref)
            outcomes = await _race([plain(s, n, ref) for n, s in enumerate(stores)])
            assert [o for o in outcomes if o is not None] == []
            await _assert_each_writer_landed_once(stores[0], ref, WRITERS)
    finally:
        await _close(stores)


@pytest.mark.parametrize("migrated_url", SERVERS, indirect=True)
async def test_writers_of_different_keys_in_crossing_order_do_not_deadlock(
    migrated_url: str,
) -> None:
    # Index order c < d < l < m. Each writer updates an existing key, then creates a new key
    # just below the other's existing one. On InnoDB an upsert of an existing key would lock
    # the gap below it, and each new key would wait for the other writer's gap: a deadlock.
    # A put of an existing key is a plain UPDATE there, which locks only its row.
    stores = await _stores(migrated_url, 2)
    scope = KVScope(namespace="gaps")
    both_updated = asyncio.Barrier(2)

    def writer(store: SqlStateStore, existing: str, new: str):
        async def once() -> None:
            async with store.transaction() as tx:
                await tx.kv.put(scope, "b", existing, new)
                await both_updated.wait()
                await tx.kv.put(scope, "b", new, existing)

        return once

    try:
        async with stores[0].transaction() as tx:
            await tx.kv.put(scope, "b", "d", "first")
            await tx.kv.put(scope, "b", "m", "first")
        outcomes = await asyncio.wait_for(
            _race([writer(stores[0], "m", "c"), writer(stores[1], "d", "l")]), timeout=20
        )
        async with stores[0].transaction() as tx:
            entries = await tx.kv.entries(scope)
    finally:
        await _close(stores)
    assert outcomes == [None, None]
    assert [(e.key, e.value, e.revision) for e in entries] == [
        ("c", "m", 1),
        ("d", "l", 2),
        ("l", "d", 1),
        ("m", "c", 2),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("migrated_url", SQL_DIALECTS, indirect=True)
async def test_racing_creators_of_a_new_session_each_land_once(migrated_url: str) -> None:
    stores = await _stores(migrated_url, WRITERS)
    refs = [SessionRef(namespace="new", agent_id="a", session_id=f"s{i}") for i in range(3)]
    runs = {(ref.session_id, n): 0 for ref in refs for n in range(WRITERS)}

    def retried(store: SqlStateStore, number: int, ref: SessionRef):
        work = _writer(ref, number)

        async def counted(tx: StoreTransaction) -> None:
            runs[ref.session_id, number] += 1
            await work(tx)

        # Generous: eight creators in opposite orders is contention made on purpose (up to
        # seven runs for one writer have been seen on PostgreSQL).
        return lambda: run_transaction(store, counted, attempts=25)

    try:
        for ref in refs:
            outcomes = await _race([retried(s, n, ref) for n, s in enumerate(stores)])
            assert [o for o in outcomes if o is not None] == []
            await _assert_each_writer_landed_once(stores[0], ref, WRITERS)
    finally:
        await _close(stores)
    again = sum(runs.values()) - len(runs)
    print(f"{len(refs)} x {WRITERS} writers: {again} ran again, at most {max(runs.values())} runs")


@pytest.mark.parametrize("migrated_url", SERVERS, indirect=True)
async def test_a_deadlock_victim_runs_again_and_both_writes_land(migrated_url: str) -> None:
    stores = await _stores(migrated_url, 2)
    try:
        crossed = await _writers_crossing_on_x_and_y(stores, KVScope(namespace="victim"))
    finally:
        await _close(stores)
    assert crossed.outcomes == [None, None]
    # The database rolled one back; it ran again after the other committed.
    assert sorted(crossed.runs) == [1, 2]
    x, y = crossed.x, crossed.y
    assert x is not None and y is not None
    assert (x.revision, y.revision) == (3, 3)
    loser = crossed.runs.index(2)
    assert x.value == y.value == loser


@pytest.mark.parametrize("migrated_url", SERVERS, indirect=True)
async def test_the_last_conflict_is_raised_when_the_attempts_are_used_up(
    migrated_url: str,
) -> None:
    stores = await _stores(migrated_url, 2)
    try:
        crossed = await _writers_crossing_on_x_and_y(stores, KVScope(namespace="once"), attempts=1)
    finally:
        await _close(stores)
    assert crossed.runs == [1, 1]
    errors = [o for o in crossed.outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1 and isinstance(errors[0], DBAPIError)
    assert stores[0].is_transient_error(errors[0])
    winner = crossed.outcomes.index(None)
    # Only the winner's writes are stored: the victim's first put was rolled back with it.
    x, y = crossed.x, crossed.y
    assert x is not None and y is not None
    assert (x.value, x.revision, y.value, y.revision) == (winner, 2, winner, 2)


@pytest.mark.parametrize("migrated_url", SERVERS, indirect=True)
async def test_lock_timeouts_and_serialization_failures_count_as_transient(
    migrated_url: str,
) -> None:
    """The errors no race above produces reliably, provoked directly on the server."""
    store = await SqlStateStore.connect(migrated_url)
    engine = create_async_engine(migrated_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE probe (id INT PRIMARY KEY, v INT)"))
            await conn.execute(text("INSERT INTO probe VALUES (1, 0)"))
        async with engine.connect() as holder, engine.connect() as waiter:
            if store.dialect == "mysql":
                # ER_LOCK_WAIT_TIMEOUT after one second.
                await waiter.execute(text("SET SESSION innodb_lock_wait_timeout = 1"))
            else:
                # serialization_failure: a repeatable-read snapshot older than the update.
                await waiter.execution_options(isolation_level="REPEATABLE READ")
                await waiter.execute(text("SELECT v FROM probe"))
            await holder.execute(text("UPDATE probe SET v = 1 WHERE id = 1"))
            if store.dialect == "postgresql":
                await holder.commit()
            with pytest.raises(DBAPIError) as raised:
                await waiter.execute(text("UPDATE probe SET v = 2 WHERE id = 1"))
            await waiter.rollback()
            await holder.rollback()
        with pytest.raises(DBAPIError) as duplicate:
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO probe VALUES (1, 0)"))
    finally:
        await engine.dispose()
        await store.close()
    assert store.is_transient_error(raised.value)
    # A constraint violation is a mistake, not a conflict: running it again cannot help.
    assert not store.is_transient_error(duplicate.value)


async def test_a_busy_sqlite_database_is_tried_again(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'busy.db'}"
    await upgrade_database(url)
    holder = await SqlStateStore.connect(url)
    # A waiter that gives up on the write lock after 50 ms instead of 30 s.
    waiter = await SqlStateStore.connect(url, connect_args={"timeout": 0.05})
    scope = KVScope(namespace="busy")
    try:
        held = await hold_write_lock(holder, 0.4, scope)
        with pytest.raises(DBAPIError) as busy:
            async with waiter.transaction() as tx:
                await tx.kv.put(scope, "b", "k", "never")
        with caplog.at_level(logging.INFO, logger="statecore.store"):
            revision = await run_transaction(
                waiter, lambda tx: tx.kv.put(scope, "b", "k", "waiter"), attempts=30
            )
        await held
        async with waiter.transaction() as tx:
            entry = await tx.kv.get(scope, "b", "k")
    finally:
        await holder.close()
        await waiter.close()
    assert waiter.is_transient_error(busy.value)
    # BEGIN IMMEDIATE found the database busy at least once, and the transaction ran again.
    assert any("running it again" in r.getMessage() for r in caplog.records)
    # The holder's write came first (revision 1), the waiter's once the lock was free.
    assert revision == 2
    assert entry is not None and (entry.value, entry.revision) == ("waiter", 2)


@pytest.mark.parametrize("migrated_url", SQL_DIALECTS, indirect=True)
async def test_an_error_that_is_not_a_conflict_is_raised_at_once(migrated_url: str) -> None:
    store = await SqlStateStore.connect(migrated_url)
    scope = KVScope(namespace="stale")
    runs = 0

    async def stale_write(tx: StoreTransaction) -> None:
        nonlocal runs
        runs += 1
        await tx.kv.put(scope, "b", "other", "written first")
        await tx.kv.put(scope, "b", "k", "late", expected_revision=7)

    try:
        async with store.transaction() as tx:
            await tx.kv.put(scope, "b", "k", "current")
        with pytest.raises(RevisionConflictError):
            await run_transaction(store, stale_write)
        async with store.transaction() as tx:
            entries = await tx.kv.entries(scope)
    finally:
        await store.close()
    assert runs == 1
    assert [(e.key, e.value) for e in entries] == [("k", "current")]


async def test_the_memory_backend_runs_the_work_once() -> None:
    store = MemoryStateStore()
    scope = KVScope(namespace="mem")
    revision = await run_transaction(store, lambda tx: tx.kv.put(scope, "b", "k", 1))
    with pytest.raises(RevisionConflictError):
        await run_transaction(store, lambda tx: tx.kv.put(scope, "b", "k", 2, expected_revision=0))
    async with store.transaction() as tx:
        entry = await tx.kv.get(scope, "b", "k")
    assert revision == 1
    assert entry is not None and (entry.value, entry.revision) == (1, 1)
    assert not store.is_transient_error(RevisionConflictError("stale"))


@pytest.mark.parametrize("attempts", [0, -1, 101, 2.5, True])
async def test_attempts_outside_1_to_100_are_refused_before_anything_runs(
    attempts: Any,
) -> None:
    store = MemoryStateStore()
    ran = False

    async def work(tx: StoreTransaction) -> None:
        nonlocal ran
        ran = True

    with pytest.raises(InvalidLimitError):
        await run_transaction(store, work, attempts=attempts)
    assert not ran


async def test_a_store_without_read_only_transactions_still_runs_writes() -> None:
    """Stores written against the contract before ``transaction(read_only=...)`` existed
    take no argument; run_transaction passes one only when asked for a read-only run."""

    class OlderStore(MemoryStateStore):
        def transaction(self):  # type: ignore[override]
            return super().transaction()

    store = OlderStore()
    ref = SessionRef(namespace="older", agent_id="agent", session_id="s")

    async def write(tx: StoreTransaction) -> int:
        await tx.sessions.ensure(ref)
        return await tx.kv.put(ref.kv_scope, "b", "k", 1)

    assert await run_transaction(store, write) == 1


async def test_a_store_that_asks_for_a_restart_runs_the_work_again_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RestartTransaction (a shortcut that wrote nothing gave up): the work runs again
    without a pause and without using an attempt, up to MAX_RESTARTS times in a row."""
    store = MemoryStateStore()
    scope = KVScope(namespace="restart")
    pauses: list[float] = []

    async def no_pause(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", no_pause)
    runs = 0

    async def restarting_twice(tx: StoreTransaction) -> int:
        nonlocal runs
        runs += 1
        if runs <= 2:
            raise RestartTransaction("the shortcut could not be taken")
        return await tx.kv.put(scope, "b", "k", runs)

    assert await run_transaction(store, restarting_twice, attempts=1) == 1
    assert runs == 3 and pauses == []

    async def always(tx: StoreTransaction) -> None:
        raise RestartTransaction("never")

    with pytest.raises(RestartTransaction):
        await run_transaction(store, always)
    async with store.transaction() as tx:
        entry = await tx.kv.get(scope, "b", "k")
    assert entry is not None and entry.value == 3
    assert pauses == []
