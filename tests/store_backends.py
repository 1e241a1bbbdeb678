"""Open real, empty stores for tests: memory, a SQLite file, a fresh server database.

Databases come from ``dbs.fresh_database`` (uniquely named, dropped afterwards; the test is
skipped with the reason when the server is unreachable).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from statecore.store._base import StateStore
from tests.dbs import fresh_database

#: Every test module of the control plane runs on these; PostgreSQL is added where marked.
BACKENDS = ["memory", "sqlite"]


@asynccontextmanager
async def open_backend(kind: str, directory: Path, name: str = "db") -> AsyncIterator[StateStore]:
    """A fresh, empty store of ``kind``: memory, sqlite (a file in ``directory``), postgres
    or mariadb."""
    if kind == "memory":
        from statecore.store.memory import MemoryStateStore

        store: StateStore = MemoryStateStore()
        try:
            yield store
        finally:
            await store.close()
        return
    from statecore.store import open_store

    if kind == "sqlite":
        store = await open_store(f"sqlite+aiosqlite:///{directory / name}.db", migrate=True)
        try:
            yield store
        finally:
            await store.close()
        return
    dialect = {"postgres": "postgresql", "mariadb": "mysql"}[kind]
    async with fresh_database(dialect, name) as url:
        store = await open_store(url, migrate=True)
        try:
            yield store
        finally:
            await store.close()
