"""open_store(url) and the database URL forms it accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from statecore.core._errors import InvalidInputError
from statecore.core._models import SessionRef
from statecore.store import MemoryStateStore, normalize_database_url, open_store
from tests.store.conftest import FakeClock


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sqlite:///agent.db", "sqlite+aiosqlite:///agent.db"),
        (
            "sqlite:////var/lib/statecore/agent.db",
            "sqlite+aiosqlite:////var/lib/statecore/agent.db",
        ),
        ("sqlite://", "sqlite+aiosqlite://"),
        ("sqlite+aiosqlite:///agent.db", "sqlite+aiosqlite:///agent.db"),
        ("postgresql://app:secret@db:5432/state", "postgresql+asyncpg://app:secret@db:5432/state"),
        ("postgres://app@db/state", "postgresql+asyncpg://app@db/state"),
        ("postgresql+asyncpg://app@db/state", "postgresql+asyncpg://app@db/state"),
        ("mysql://root@127.0.0.1:3306/test", "mysql+asyncmy://root@127.0.0.1:3306/test"),
        ("mariadb://root@127.0.0.1/test", "mariadb+asyncmy://root@127.0.0.1/test"),
        ("MySQL://root@h/db?charset=utf8mb4", "mysql+asyncmy://root@h/db?charset=utf8mb4"),
        # An escaped password stays escaped: nothing is decoded or lost on the way.
        ("postgresql://app:p%40ss%2Fw@db/state", "postgresql+asyncpg://app:p%40ss%2Fw@db/state"),
    ],
)
def test_normalize_database_url(given: str, expected: str) -> None:
    assert normalize_database_url(given) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "agent.db",
        "oracle://scott@db/orcl",
        "postgresql+psycopg2://app@db/state",
        "sqlite+pysqlite:///agent.db",
        "mysql+pymysql://root@h/db",
        "memory",
    ],
)
def test_normalize_rejects_what_it_cannot_open(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        normalize_database_url(bad)


async def test_memory_url_opens_the_memory_backend() -> None:
    clock = FakeClock()
    store = await open_store("memory://", clock=clock, default_ttl_seconds=77)
    try:
        assert isinstance(store, MemoryStateStore) and store.dialect == "memory"
        async with store.transaction() as tx:
            info = await tx.sessions.ensure(SessionRef(agent_id="a", session_id="s"))
        assert (info.ttl_seconds, info.created_at) == (77, clock())
    finally:
        await store.close()


async def test_unknown_url_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        await open_store("redis://localhost/0")


async def test_sqlite_url_opens_a_migrated_sql_store(tmp_path: Path) -> None:
    pytest.importorskip("statecore.store._migrate", reason="the SQL backend is not available")
    sql = pytest.importorskip("statecore.store.sql", reason="the SQL backend is not available")
    if not hasattr(sql, "SqlStateStore"):
        pytest.skip("the SQL backend is not available yet")
    clock = FakeClock()
    store = await open_store(f"sqlite:///{tmp_path / 'agent.db'}", clock=clock, migrate=True)
    try:
        assert isinstance(store, sql.SqlStateStore) and store.dialect == "sqlite"
        ref = SessionRef(agent_id="a", session_id="s")
        async with store.transaction() as tx:
            await tx.sessions.ensure(ref)
        async with store.transaction() as tx:
            info = await tx.sessions.get(ref)
        assert info is not None and info.created_at == clock()
    finally:
        await store.close()
