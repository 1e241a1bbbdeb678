"""Which schema revision a database is at, and the one this code needs."""

from __future__ import annotations

from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from statecore.errors import MigrationError

#: The revision this code's schema corresponds to (the newest file in migrations/versions).
HEAD_REVISION = "0001"


def revision_of(connection: Connection) -> str | None:
    """The revision recorded in a database (None when it was never migrated)."""
    return MigrationContext.configure(connection).get_current_revision()


async def require_head(engine: AsyncEngine) -> None:
    """MigrationError unless the database is at HEAD_REVISION."""
    async with engine.connect() as conn:
        revision = await conn.run_sync(revision_of)
    if revision != HEAD_REVISION:
        found = "no statecore schema" if revision is None else f"revision {revision}"
        raise MigrationError(
            f"the database has {found}; this statecore needs revision {HEAD_REVISION}. "
            "Run `statecore db upgrade` (or statecore.store.migrate.upgrade_database) first",
            found=revision,
            required=HEAD_REVISION,
        )
