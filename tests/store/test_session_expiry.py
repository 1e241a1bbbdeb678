"""A session's stored expiry: rounded up to a step, so the turns of an active session do not
rewrite the indexed column (statecore/store/sql/_session_expiry.py)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from statecore.core._models import Message, SessionRef
from statecore.store._migrate import upgrade_database
from statecore.store.sql import SqlStateStore
from statecore.store.sql._session_expiry import MAX_EXPIRY_STEP, expiry, expiry_step
from tests.dbs import fresh_database
from tests.store.conftest import FakeClock

DIALECTS = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]
REF = SessionRef(namespace="expiry", agent_id="agent", session_id="s1")
DAY = 86_400


def test_the_stored_expiry_is_never_early_and_at_most_a_step_late() -> None:
    rng = random.Random(7)
    start = datetime(2026, 11, 26, tzinfo=UTC)
    for ttl in (1, 2, 59, 60, 64, 3_600, 3_840, DAY, 30 * DAY):
        step = expiry_step(ttl)
        assert step == min(timedelta(seconds=ttl) / 64, MAX_EXPIRY_STEP)
        for _ in range(200):
            at = start + timedelta(microseconds=rng.randrange(10**13))
            exact = at + timedelta(seconds=ttl)
            stored = expiry(at, ttl)
            assert exact <= stored <= exact + step, (ttl, at)


def test_accesses_within_one_step_store_the_same_expiry() -> None:
    minute = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    stored = {expiry(minute + timedelta(seconds=s), DAY) for s in (0.000001, 1, 30, 59.999999)}
    assert stored == {minute + timedelta(days=1, minutes=1)}
    # On the step's boundary itself, the exact moment is kept.
    assert expiry(minute, DAY) == minute + timedelta(days=1)


def test_a_time_in_another_zone_gives_the_same_moment() -> None:
    at = datetime(2026, 11, 26, 12, 0, 17, tzinfo=UTC)
    elsewhere = at.astimezone(datetime.fromisoformat("2026-01-01T00:00:00+05:30").tzinfo)
    assert expiry(elsewhere, DAY) == expiry(at, DAY)


@pytest.fixture(scope="module", params=DIALECTS)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with fresh_database(request.param, "expiry") as database_url:
        await upgrade_database(database_url)
        yield database_url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(url: str, clock: FakeClock) -> AsyncIterator[SqlStateStore]:
    opened = await SqlStateStore.connect(url, clock=clock)
    async with opened.transaction() as tx:
        await tx.sessions.delete_namespace(REF.namespace)
    try:
        yield opened
    finally:
        await opened.close()


async def turn(store: SqlStateStore, turn_id: str) -> None:
    async with store.transaction() as tx:
        await tx.sessions.ensure(REF)
        await tx.conversation.append(REF, turn_id, [Message(role="user", content="hello")])


async def stored_expiry(store: SqlStateStore) -> datetime:
    """The expiry in the session's row as SQL holds it (a transaction sends its header
    updates before it commits), once the sweep's own query has found the session."""
    async with store.transaction(read_only=True) as tx:
        found = await tx.sessions.expired(datetime(9999, 1, 1, tzinfo=UTC), limit=1000)
    assert REF in found
    async with store.engine.connect() as conn:
        value = (
            await conn.execute(
                text(
                    "SELECT expires_at FROM statecore_sessions WHERE namespace = :ns "
                    "AND agent_id = :agent AND session_id = :session"
                ),
                {"ns": REF.namespace, "agent": REF.agent_id, "session": REF.session_id},
            )
        ).scalar_one()
    return value


async def test_turns_within_the_step_store_the_same_expiry(
    store: SqlStateStore, clock: FakeClock
) -> None:
    clock.advance(seconds=60 - clock().second - clock().microsecond / 1e6 + 1)  # hh:mm:01
    await turn(store, "t0")
    first = await stored_expiry(store)
    for n in range(1, 5):
        clock.advance(5)
        await turn(store, f"t{n}")
        assert await stored_expiry(store) == first
    clock.advance(60)  # the next step: the expiry moves
    await turn(store, "t5")
    assert await stored_expiry(store) != first

    # The sweep never takes it early, and takes it at most one step late.
    exact = clock() + timedelta(days=1)
    async with store.transaction() as tx:
        assert REF not in await tx.sessions.expired(exact)
        assert REF in await tx.sessions.expired(exact + expiry_step(DAY) + timedelta(seconds=1))


@pytest.mark.postgres
async def test_consecutive_turns_update_the_header_in_place_on_postgresql(
    clock: FakeClock,
) -> None:
    """Heap-only (HOT) updates: the header's row versions get no index entries, and
    PostgreSQL prunes them without vacuum. With the exact expiry stored, none was HOT."""
    async with fresh_database("postgresql", "hot") as url:
        await upgrade_database(url)
        store = await SqlStateStore.connect(url, clock=clock)
        try:
            clock.advance(seconds=60 - clock().second - clock().microsecond / 1e6 + 1)
            for n in range(20):
                clock.advance(2)
                await turn(store, f"hot-{n}")
        finally:
            await store.close()  # its backends exit, which reports their statistics
        updated, hot = await _header_update_counts(url, at_least=20)
    # A step boundary may fall among the 20 turns (2 s apart, 40 s in all): then one update
    # moves the expiry; every other is in place.
    assert updated == 20 and hot >= 19, (updated, hot)


async def _header_update_counts(url: str, *, at_least: int) -> tuple[int, int]:
    """(updates, heap-only updates) of the sessions table, once the statistics of the
    store's exited backends show ``at_least`` updates (30 s at most)."""
    admin = await SqlStateStore.connect(url)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    try:
        while True:
            async with admin.engine.connect() as conn:
                updated, hot = (
                    await conn.execute(
                        text(
                            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                            "WHERE relname = 'statecore_sessions'"
                        )
                    )
                ).one()
            if updated >= at_least:
                return int(updated), int(hot)
            if loop.time() > deadline:
                raise AssertionError(
                    f"waited 30 s for the statistics of {at_least} header updates: {updated}"
                )
            await asyncio.sleep(0.2)
    finally:
        await admin.close()
