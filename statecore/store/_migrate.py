"""Schema migrations: bring a database to the schema this code needs.

Alembic is configured in code (the scripts ship inside the package under
``statecore/store/migrations``), so no ``alembic.ini`` is needed at run time::

    await upgrade_database("sqlite+aiosqlite:///statecore.db")   # `statecore db upgrade`
"""

from __future__ import annotations

from statecore.store.sql._engine import create_store_engine
from statecore.store.sql._revision import (
    HEAD_REVISION,
    MIGRATIONS_DIR,
    alembic_config,
    revision_of,
    script_head,
    upgrade_engine,
)

__all__ = [
    "HEAD_REVISION",
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "script_head",
    "upgrade_database",
]


async def upgrade_database(url: str, revision: str = "head") -> str:
    """Upgrade the database at ``url`` to ``revision`` and return the revision now current."""
    engine = create_store_engine(url)
    try:
        return await upgrade_engine(engine, revision)
    finally:
        await engine.dispose()


async def current_revision(url: str) -> str | None:
    """The revision of the database at ``url``, None if it has no statecore schema."""
    engine = create_store_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(revision_of)
    finally:
        await engine.dispose()
