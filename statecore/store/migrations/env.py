"""Alembic environment for statecore's schema.

``statecore.store._migrate`` runs migrations on a connection it opened itself and passes it in
``config.attributes["connection"]``. The plain ``alembic`` command (for writing new
revisions) gets ``sqlalchemy.url`` instead and this module opens an async engine for it.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Connection

from statecore.store.sql._engine import create_store_engine
from statecore.store.sql._schema import TABLE_PREFIX, VERSION_TABLE, metadata

config = context.config


def _is_statecore(name: str | None, type_: str, _parents: object) -> bool:
    # The database may hold the application's own tables; autogenerate must neither drop
    # them nor count them as drift.
    return type_ != "table" or bool(name and name.startswith(TABLE_PREFIX))


def _run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=_is_statecore,
        compare_type=True,
        # SQLite cannot ALTER most constraints; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    _refuse_downgrade_onto_taken_names(connection)
    with context.begin_transaction():
        context.run_migrations()


def _refuse_downgrade_onto_taken_names(connection: Connection) -> None:
    """Refuse, before any step runs, a downgrade below revision 0002 that its own check would
    refuse half way: MySQL and MariaDB cannot roll DDL back, so the later revisions' steps
    would already be undone when 0002's check stops the run."""
    destination = context.get_revision_argument()
    if destination not in (None, "base", "0001"):  # Alembic passes "base" on as None
        return
    current = context.get_context().get_current_revision()
    if current in (None, "0001"):
        return
    guard = context.script.get_revision("0002")
    assert guard is not None
    check = getattr(guard.module, "refuse_if_names_taken", None)
    if check is not None:
        check(set(sa_inspect(connection).get_table_names()))


async def _run_with_own_engine(url: str) -> None:
    engine = create_store_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_run_on)
    finally:
        await engine.dispose()


def _run_offline(url: str) -> None:
    context.configure(
        url=url, target_metadata=metadata, version_table=VERSION_TABLE, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_on(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url or use statecore.store._migrate.upgrade_database")
    if context.is_offline_mode():
        _run_offline(url)
    else:
        asyncio.run(_run_with_own_engine(url))


_main()
