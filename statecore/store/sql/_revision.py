"""Alembic on an engine: which schema revision a database is at, and upgrading it.

The migration scripts ship inside the package (``statecore/store/migrations``) and Alembic
is configured here in code, so no ``alembic.ini`` is needed at run time.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from statecore.core._errors import MigrationError
from statecore.store.sql._engine import SQLITE_BUSY_TIMEOUT_SECONDS
from statecore.store.sql._migration_lock import MIGRATION_LOCK_TIMEOUT_SECONDS, migration_lock
from statecore.store.sql._schema import metadata
from statecore.store.sql._version_table import (
    move_legacy_version_table,
    recorded_revision,
    unrecorded_legacy_tables,
)

MIGRATIONS_DIR = Path(__file__).parent.parent / "migrations"

#: The revision this code's schema corresponds to (the newest file in migrations/versions).
HEAD_REVISION = "0008_blobs"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config pointing at statecore's migration scripts."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        # ConfigParser interpolates '%'; URLs carry it in escaped passwords.
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def script_head() -> str:
    """The head revision found in the shipped scripts (a test keeps HEAD_REVISION equal)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise MigrationError("no migration scripts found in the statecore package")
    return head


def revision_of(connection: Connection) -> str | None:
    """statecore's revision recorded in a database (None when statecore never migrated it),
    read from ``statecore_alembic_version`` or, before revision 0002, ``alembic_version``."""
    return recorded_revision(connection)


async def upgrade_engine(
    engine: AsyncEngine,
    revision: str = "head",
    *,
    lock_timeout: float = MIGRATION_LOCK_TIMEOUT_SECONDS,
) -> str:
    """Upgrade the database behind ``engine`` to ``revision``; returns the revision now
    current. Concurrent upgrades of one database run one after the other (``migration_lock``);
    one waits at most ``lock_timeout`` seconds for another."""
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_upgrade_locked, revision, lock_timeout)
    except OperationalError as exc:
        if engine.dialect.name == "sqlite" and "database is locked" in str(exc.orig):
            raise MigrationError(
                "waited the connection's busy timeout (statecore's default: "
                f"{SQLITE_BUSY_TIMEOUT_SECONDS:g} s) for SQLite's write lock to migrate "
                f"{engine.url.database}; another process kept writing to it or migrating it"
            ) from exc
        raise
    async with engine.connect() as conn:
        current = await conn.run_sync(revision_of)
    if current is None:
        raise MigrationError(f"upgrading to {revision!r} left the database without a revision")
    return current


async def require_head(engine: AsyncEngine) -> None:
    """MigrationError unless the database is at HEAD_REVISION."""
    async with engine.connect() as conn:
        revision = await conn.run_sync(revision_of)
    if revision != HEAD_REVISION:
        found = "no statecore schema" if revision is None else f"revision {revision}"
        raise MigrationError(
            f"the database has {found}; this statecore needs revision {HEAD_REVISION}. "
            "Run `statecore db upgrade` (or statecore.store._migrate.upgrade_database) first",
            found=revision,
            required=HEAD_REVISION,
        )


def _upgrade_locked(connection: Connection, revision: str, lock_timeout: float) -> None:
    # Read the revision only once the lock is held: the previous holder may have just
    # migrated the database.
    with migration_lock(connection, lock_timeout):
        move_legacy_version_table(connection)
        if revision in ("head", HEAD_REVISION) and revision_of(connection) is None:
            _create_at_head(connection)
        else:
            _upgrade(connection, revision)
        # Committed while the lock is held: MariaDB's named lock belongs to the connection,
        # not to the transaction, and a process that took it before this commit would read
        # the version table without this migration's row and migrate again.
        connection.commit()


def _create_at_head(connection: Connection) -> None:
    """Build today's schema in an empty database and record it as head.

    This is Alembic's recipe for a database built from scratch. The revisions remain the way
    up from an older schema; replaying them here would first create revision 0001's
    unprefixed tables, whose names an application sharing the database may already use.
    """
    found = unrecorded_legacy_tables(connection)
    if found:
        raise MigrationError(
            f"the database has statecore's unprefixed tables ({', '.join(sorted(found))}) but no "
            "statecore revision in statecore_alembic_version or alembic_version; restore the "
            "version row (revision 0001) in alembic_version, then upgrade again",
            found=None,
            required=HEAD_REVISION,
        )
    # checkfirst=False: a statecore table already present without a recorded revision is an
    # error to show, not something to build around.
    metadata.create_all(connection, checkfirst=False)
    config = alembic_config()
    config.attributes["connection"] = connection
    command.stamp(config, "head")


def _upgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)
