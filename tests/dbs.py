"""Fresh databases for tests on the local servers, one uniquely named database per use.

``fresh_database("postgresql")`` creates a database, yields its URL and drops it afterwards;
when the server is unreachable it skips the calling test with the reason. SQLite databases
are files in a temporary directory.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

POSTGRES_ADMIN_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
MARIADB_ADMIN_URL = "mysql+asyncmy://root@127.0.0.1:3306/test"

#: What statecore asks of a MariaDB/MySQL server for 16 MB documents (see the README).
MARIADB_MAX_ALLOWED_PACKET = 64 * 1024 * 1024

#: The dialects a test can ask for (the names SqlStateStore.dialect reports).
DIALECTS = ("sqlite", "postgresql", "mysql")


def _admin_engine(dialect: str) -> AsyncEngine:
    if dialect == "postgresql":
        return create_async_engine(
            POSTGRES_ADMIN_URL,
            poolclass=NullPool,
            isolation_level="AUTOCOMMIT",  # CREATE DATABASE cannot run in a transaction
            connect_args={"timeout": 5},
        )
    if dialect == "mysql":
        return create_async_engine(
            MARIADB_ADMIN_URL, poolclass=NullPool, connect_args={"connect_timeout": 5}
        )
    raise ValueError(f"no admin server for dialect {dialect!r}")


async def server_down_reason(dialect: str) -> str | None:
    """Why the server for ``dialect`` cannot be used, or None when it answers."""
    if dialect == "sqlite":
        return None
    engine = _admin_engine(dialect)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except (OSError, OperationalError, InterfaceError, DBAPIError) as exc:
        url = POSTGRES_ADMIN_URL if dialect == "postgresql" else MARIADB_ADMIN_URL
        return (
            f"{dialect} server at {make_url(url).host}:{make_url(url).port} is unreachable: {exc}"
        )
    finally:
        await engine.dispose()
    return None


async def create_database(dialect: str, label: str = "t") -> str:
    """Create a uniquely named database and return its URL (skips the test if the server is
    down). Pair with ``drop_database``."""
    reason = await server_down_reason(dialect)
    if reason is not None:
        pytest.skip(reason)
    name = f"sc_{label}_{uuid.uuid4().hex[:12]}".lower()
    engine = _admin_engine(dialect)
    try:
        async with engine.begin() as conn:
            if dialect == "postgresql":
                await conn.execute(text(f'CREATE DATABASE "{name}"'))
            else:
                await conn.execute(
                    text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
                )
                await _allow_full_size_documents(conn)
    finally:
        await engine.dispose()
    admin = POSTGRES_ADMIN_URL if dialect == "postgresql" else MARIADB_ADMIN_URL
    return make_url(admin).set(database=name).render_as_string(hide_password=False)


async def _allow_full_size_documents(conn: AsyncConnection) -> None:
    """MariaDB's default max_allowed_packet (16 MiB) cannot carry a 16 MB scoped-state
    document in one statement; production servers are told to use 64M (MySQL 8's default),
    and so is the test server. Applies to connections opened from now on."""
    current = await conn.scalar(text("SELECT @@GLOBAL.max_allowed_packet"))
    if int(current) < MARIADB_MAX_ALLOWED_PACKET:
        await conn.execute(text(f"SET GLOBAL max_allowed_packet = {MARIADB_MAX_ALLOWED_PACKET}"))


async def drop_database(url: str) -> None:
    """Drop a database made by ``create_database`` (closing other sessions on PostgreSQL)."""
    parsed = make_url(url)
    dialect = "postgresql" if parsed.get_backend_name() == "postgresql" else "mysql"
    engine = _admin_engine(dialect)
    try:
        async with engine.begin() as conn:
            if dialect == "postgresql":
                await conn.execute(
                    text(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')
                )
            else:
                await conn.execute(text(f"DROP DATABASE IF EXISTS `{parsed.database}`"))
    finally:
        await engine.dispose()


@asynccontextmanager
async def fresh_database(dialect: str, label: str = "t") -> AsyncIterator[str]:
    """A new empty database of ``dialect`` for the duration of the block; yields its URL."""
    if dialect == "sqlite":
        with tempfile.TemporaryDirectory(prefix="statecore-test-") as tmp:
            yield f"sqlite+aiosqlite:///{Path(tmp) / f'{label}.db'}"
        return
    url = await create_database(dialect, label)
    try:
        yield url
    finally:
        await drop_database(url)
