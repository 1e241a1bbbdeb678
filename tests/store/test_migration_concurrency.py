"""Workers starting together against one empty database migrate it once, one after the
other; a migration that cannot get the lock in time says what it waited for."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from statecore.core._errors import MigrationError
from statecore.store._migrate import HEAD_REVISION
from statecore.store.sql._engine import create_store_engine
from statecore.store.sql._migration_lock import MYSQL_LOCK_PREFIX, POSTGRES_LOCK_KEY
from statecore.store.sql._revision import upgrade_engine
from statecore.store.sql._schema import VERSION_TABLE
from tests.dbs import fresh_database
from tests.store.migration_helpers import ALL, PREFIXED, table_names

WORKERS = 5
#: One worker process: open the store with migrate=True, write a row, print the revision.
WORKER = """
import asyncio, sys
from statecore.core._models import SessionRef
from statecore.store import open_store
from statecore.store._migrate import current_revision

async def main(url, name):
    store = await open_store(url, migrate=True)
    try:
        async with store.transaction() as tx:
            await tx.sessions.ensure(SessionRef(namespace="race", agent_id="a", session_id=name))
    finally:
        await store.close()
    print(await current_revision(url))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""
ROOT = Path(__file__).resolve().parents[2]


async def _run_worker(url: str, name: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WORKER,
        url,
        name,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"worker {name} did not finish migrating within 120 s") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _versions(url: str) -> list[str]:
    engine = create_store_engine(url)
    try:
        async with engine.connect() as conn:
            result = await conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))
            return [str(v) for v in result.scalars().all()]
    finally:
        await engine.dispose()


@pytest.mark.parametrize("dialect", ALL)
async def test_workers_starting_together_migrate_an_empty_database_once(dialect: str) -> None:
    async with fresh_database(dialect, "race") as url:
        results = await asyncio.gather(*(_run_worker(url, f"w{n}") for n in range(WORKERS)))
        for code, out, err in results:
            assert code == 0, err
            assert out.strip() == HEAD_REVISION
        assert await _versions(url) == [HEAD_REVISION]
        assert await table_names(url) == PREFIXED | {VERSION_TABLE}
        engine = create_store_engine(url)
        try:
            async with engine.connect() as conn:
                names = await conn.scalars(
                    text("SELECT session_id FROM statecore_sessions ORDER BY session_id")
                )
                assert list(names) == [f"w{n}" for n in range(WORKERS)]
        finally:
            await engine.dispose()


@pytest.mark.parametrize("dialect", ALL)
async def test_engines_in_one_process_migrate_an_empty_database_once(dialect: str) -> None:
    async with fresh_database(dialect, "race") as url:
        engines = [create_store_engine(url) for _ in range(WORKERS)]
        try:
            revisions = await asyncio.gather(*(upgrade_engine(e) for e in engines))
        finally:
            for engine in engines:
                await engine.dispose()
        assert revisions == [HEAD_REVISION] * WORKERS
        assert await _versions(url) == [HEAD_REVISION]


@pytest.mark.parametrize("dialect", ALL)
async def test_a_migration_waits_for_the_lock_a_bounded_time(dialect: str) -> None:
    async with fresh_database(dialect, "lock") as url:
        holder = create_store_engine(url)
        migrator = create_store_engine(url, **_short_sqlite_wait(dialect))
        try:
            async with holder.connect() as conn:
                await _hold_migration_lock(conn, dialect)
                with pytest.raises(MigrationError, match="waited") as caught:
                    await upgrade_engine(migrator, lock_timeout=0.5)
                await _release_migration_lock(conn, dialect)
            expected = {
                "sqlite": "SQLite's write lock",
                "postgresql": f"PostgreSQL advisory lock {POSTGRES_LOCK_KEY}",
                "mysql": MYSQL_LOCK_PREFIX,
            }[dialect]
            assert expected in str(caught.value)
            assert VERSION_TABLE not in await table_names(url)
            # Once the holder is gone the same migration goes through.
            assert await upgrade_engine(migrator, lock_timeout=5) == HEAD_REVISION
        finally:
            await migrator.dispose()
            await holder.dispose()


def _short_sqlite_wait(dialect: str) -> dict[str, object]:
    # SQLite's wait is the connection's busy timeout, not the migration lock's.
    return {"connect_args": {"timeout": 0.5}} if dialect == "sqlite" else {}


async def _hold_migration_lock(conn: AsyncConnection, dialect: str) -> None:
    if dialect == "sqlite":
        # The engine opens every transaction with BEGIN IMMEDIATE: the write lock is held.
        await conn.execute(text("SELECT 1"))
    elif dialect == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": POSTGRES_LOCK_KEY})
    else:
        database = await conn.scalar(text("SELECT DATABASE()"))
        name = f"{MYSQL_LOCK_PREFIX}{database}"[:64]
        assert await conn.scalar(text("SELECT GET_LOCK(:n, 1)"), {"n": name}) == 1


async def _release_migration_lock(conn: AsyncConnection, dialect: str) -> None:
    if dialect == "mysql":
        # A named lock belongs to the session, not the transaction.
        await conn.execute(text("SELECT RELEASE_ALL_LOCKS()"))
    await conn.rollback()
