"""The SQL backend: SQLite (aiosqlite), PostgreSQL (asyncpg) and MariaDB/MySQL (asyncmy).

Migrate the database with ``statecore.store._migrate.upgrade_database(url)`` (the
``statecore db upgrade`` command), then open it with ``await SqlStateStore.connect(url)``.
"""

from statecore.store.sql._store import SqlStateStore, SqlTransaction

__all__ = ["SqlStateStore", "SqlTransaction"]
