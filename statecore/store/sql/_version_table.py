"""Where statecore's Alembic revision is recorded, including the place older releases used.

statecore records its revision in ``statecore_alembic_version`` (``VERSION_TABLE``). Releases
before revision 0002 used Alembic's default ``alembic_version``, the very table an application
migrated with Alembic keeps its own revision in. ``move_legacy_version_table`` moves statecore's
row out of it, and only when the table is provably statecore's: it holds exactly one row, that
row is a revision statecore recorded there, and statecore's unprefixed tables are all present.
An application's own ``alembic_version`` is never read past that check, let alone changed.
"""

from __future__ import annotations

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, inspect, text
from sqlalchemy.engine import Connection

from statecore.store.sql._schema import VERSION_TABLE

#: Alembic's default version table, where statecore recorded revision 0001.
LEGACY_VERSION_TABLE = "alembic_version"
#: The revisions statecore ever recorded in LEGACY_VERSION_TABLE (0002 prefixed everything).
LEGACY_REVISIONS = frozenset({"0001"})
#: statecore's tables as revision 0001 named them.
LEGACY_TABLES = frozenset(
    {
        "sessions",
        "messages",
        "hints",
        "kv_entries",
        "scoped_states",
        "flow_checkpoints",
        "orchestration_states",
    }
)


def recorded_revision(connection: Connection) -> str | None:
    """statecore's revision in the database (None when statecore never migrated it)."""
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    current = context.get_current_revision()
    if current is not None:
        return current
    return legacy_revision(connection)


def legacy_revision(connection: Connection) -> str | None:
    """statecore's revision in the unprefixed ``alembic_version``, or None when that table is
    absent, already superseded by VERSION_TABLE, or not statecore's."""
    names = set(inspect(connection).get_table_names())
    if VERSION_TABLE in names or LEGACY_VERSION_TABLE not in names:
        return None
    if not names >= LEGACY_TABLES:
        return None
    versions = (
        connection.execute(text(f"SELECT version_num FROM {LEGACY_VERSION_TABLE}")).scalars().all()
    )
    if len(versions) != 1 or versions[0] not in LEGACY_REVISIONS:
        return None
    return str(versions[0])


def unrecorded_legacy_tables(connection: Connection) -> set[str]:
    """statecore's unprefixed tables, when all of them are present although no statecore
    revision is recorded anywhere (an empty set otherwise, and for a database that merely has
    an application's ``sessions`` or ``messages``)."""
    if recorded_revision(connection) is not None:
        return set()
    names = set(inspect(connection).get_table_names())
    return set(LEGACY_TABLES) if names >= LEGACY_TABLES else set()


def move_legacy_version_table(connection: Connection) -> str | None:
    """Move statecore's revision from ``alembic_version`` to VERSION_TABLE and drop the old
    table (it held nothing else). Returns the revision moved, None when there was none."""
    revision = legacy_revision(connection)
    if revision is None:
        return None
    # The shape Alembic itself gives a version table, so Alembic takes it over unchanged.
    table = Table(
        VERSION_TABLE,
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
    )
    table.create(connection)
    connection.execute(table.insert().values(version_num=revision))
    connection.execute(text(f"DROP TABLE {LEGACY_VERSION_TABLE}"))
    return revision
