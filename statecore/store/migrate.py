"""Schema migrations: bring a database to the schema this code needs.

Alembic is configured here in code (the scripts ship inside the package under
``statecore/store/migrations``), so no ``alembic.ini`` is needed at run time::

    await upgrade_database("sqlite+aiosqlite:///statecore.db")   # `statecore db upgrade`
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from statecore.errors import MigrationError
from statecore.store.sql.engine import create_store_engine
from statecore.store.sql.revision import HEAD_REVISION, revision_of

__all__ = ["HEAD_REVISION", "current_revision", "upgrade_database"]

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


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


async def upgrade_database(url: str, revision: str = "head") -> str:
    """Upgrade the database at ``url`` to ``revision`` and return the revision now current."""
    engine = create_store_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade, revision)
        async with engine.connect() as conn:
            current = await conn.run_sync(revision_of)
    finally:
        await engine.dispose()
    if current is None:
        raise MigrationError(f"upgrading to {revision!r} left the database without a revision")
    return current


async def current_revision(url: str) -> str | None:
    """The revision of the database at ``url``, None if it has no statecore schema."""
    engine = create_store_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(revision_of)
    finally:
        await engine.dispose()


def _upgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)
