"""KV compare-and-set under real concurrency: writers on separate stores (separate engines,
connections and transactions) race on one key and no increment is ever lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from statecore.core._errors import RevisionConflictError
from statecore.core._models import KVScope
from statecore.store import run_transaction
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from tests.dbs import fresh_database

SCOPE = KVScope(namespace="race", owner="")
BUCKET, KEY = "counters", "n"

# (dialect, writers, increments per writer): the most contention on PostgreSQL, smaller runs on
# SQLite (one writer at a time by design) and MariaDB.
CASES = [
    pytest.param("postgresql", 8, 100, marks=[pytest.mark.postgres, pytest.mark.slow]),
    pytest.param("sqlite", 4, 50),
    pytest.param("mysql", 4, 60, marks=pytest.mark.mariadb),
]
DIALECTS = [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("sqlite"),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]


@pytest.fixture
async def migrated_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "race") as url:
        await upgrade_database(url)
        yield url


async def _stores(url: str, count: int) -> list[SqlStateStore]:
    return [await SqlStateStore.connect(url) for _ in range(count)]


async def _close(stores: list[SqlStateStore]) -> None:
    for store in stores:
        await store.close()


async def _increment(store: SqlStateStore, times: int) -> int:
    """Read-modify-write ``times`` increments, retrying on conflicts; returns the conflicts."""
    conflicts = done = 0
    while done < times:
        try:
            async with store.transaction() as tx:
                entry = await tx.kv.get(SCOPE, BUCKET, KEY)
                assert entry is not None
                await tx.kv.put(
                    SCOPE, BUCKET, KEY, entry.value + 1, expected_revision=entry.revision
                )
            done += 1
        except RevisionConflictError:
            conflicts += 1
    return conflicts


@pytest.mark.parametrize(
    ("migrated_url", "writers", "increments"), CASES, indirect=["migrated_url"]
)
async def test_concurrent_compare_and_set_increments_are_exact(
    migrated_url: str, writers: int, increments: int
) -> None:
    stores = await _stores(migrated_url, writers)
    try:
        async with stores[0].transaction() as tx:
            assert await tx.kv.put(SCOPE, BUCKET, KEY, 0, expected_revision=0) == 1
        started = time.monotonic()
        conflicts = await asyncio.gather(*(_increment(s, increments) for s in stores))
        elapsed = time.monotonic() - started
        async with stores[0].transaction() as tx:
            final = await tx.kv.get(SCOPE, BUCKET, KEY)
    finally:
        await _close(stores)
    assert final is not None
    assert final.value == writers * increments
    # Revision 1 is the create; every increment added exactly one.
    assert final.revision == writers * increments + 1
    print(f"{writers}x{increments}: {sum(conflicts)} conflicts retried in {elapsed:.1f}s")


@pytest.mark.parametrize("migrated_url", DIALECTS, indirect=True)
async def test_racing_creators_with_expected_revision_zero_have_one_winner(
    migrated_url: str,
) -> None:
    stores = await _stores(migrated_url, 6)
    start = asyncio.Event()

    async def create(store: SqlStateStore, label: int) -> bool:
        await start.wait()
        try:
            async with store.transaction() as tx:
                await tx.kv.put(SCOPE, BUCKET, "once", label, expected_revision=0)
        except RevisionConflictError:
            return False
        return True

    try:
        racers = [asyncio.create_task(create(s, i)) for i, s in enumerate(stores)]
        start.set()
        won = await asyncio.gather(*racers)
        async with stores[0].transaction() as tx:
            entry = await tx.kv.get(SCOPE, BUCKET, "once")
    finally:
        await _close(stores)
    assert won.count(True) == 1
    assert entry is not None and entry.revision == 1
    assert entry.value == won.index(True)


@pytest.mark.parametrize("migrated_url", DIALECTS, indirect=True)
async def test_racing_unconditional_puts_of_a_new_key_all_land(migrated_url: str) -> None:
    stores = await _stores(migrated_url, 6)
    start = asyncio.Event()

    async def put(store: SqlStateStore, label: int) -> int:
        await start.wait()
        # Callers of racing writes run them through run_transaction: a namespace-wide key
        # has no parent row to queue on, and a brand-new key is guarded by InnoDB's
        # duplicate-key next-key locks, which MariaDB may resolve as a deadlock.
        return await run_transaction(store, lambda tx: tx.kv.put(SCOPE, BUCKET, "fresh", label))

    try:
        racers = [asyncio.create_task(put(s, i)) for i, s in enumerate(stores)]
        start.set()
        revisions = await asyncio.gather(*racers)
        async with stores[0].transaction() as tx:
            entry = await tx.kv.get(SCOPE, BUCKET, "fresh")
    finally:
        await _close(stores)
    # Each write got its own revision, none was lost, and the last one is stored.
    assert sorted(revisions) == list(range(1, len(stores) + 1))
    assert entry is not None and entry.revision == len(stores)
    assert entry.value == revisions.index(len(stores))
