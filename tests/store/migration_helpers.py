"""What the migration tests share: the dialects, table listings, Alembic downgrades, and a
database laid out the way statecore left it before its tables were prefixed."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from statecore.store._migrate import alembic_config, upgrade_database
from statecore.store.sql._engine import create_store_engine
from statecore.store.sql._schema import VERSION_TABLE

ALL = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mariadb),
]
#: statecore's tables as revision 0001 named them.
UNPREFIXED = {
    "sessions",
    "messages",
    "hints",
    "kv_entries",
    "scoped_states",
    "flow_checkpoints",
    "orchestration_states",
}
#: The LangGraph checkpointer's tables (revision 0004_langgraph_checkpoints).
GRAPH_TABLES = {"statecore_graph_checkpoints", "statecore_graph_blobs", "statecore_graph_writes"}
#: The change feed's tables (revision 0005), which never had unprefixed names.
FEED_TABLES = {"statecore_events", "statecore_event_heads"}
#: The turn records' table (revision 0006).
TURN_TABLES = {"statecore_turn_records", "statecore_turn_streams"}
#: Payloads stored by reference (revision 0008_blobs).
BLOB_TABLES = {"statecore_blobs", "statecore_blob_refs"}
#: Every table at head.
PREFIXED = (
    {f"statecore_{name}" for name in UNPREFIXED}
    | GRAPH_TABLES
    | FEED_TABLES
    | TURN_TABLES
    | BLOB_TABLES
)


async def table_names(url: str) -> set[str]:
    engine = create_store_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    finally:
        await engine.dispose()


async def downgrade(url: str, revision: str) -> None:
    """Run statecore's Alembic downgrade to ``revision`` on the database at ``url``."""
    engine = create_store_engine(url)
    try:
        async with engine.begin() as conn:

            def run(sync_conn: Connection) -> None:
                config = alembic_config()
                config.attributes["connection"] = sync_conn
                command.downgrade(config, revision)

            await conn.run_sync(run)
    finally:
        await engine.dispose()


async def record_revision_the_old_way(url: str) -> None:
    """Move statecore's version row back into an unprefixed ``alembic_version``, where
    releases before revision 0002 kept it."""
    engine = create_store_engine(url)
    try:
        async with engine.begin() as conn:
            if engine.dialect.name == "mysql":
                await conn.execute(text(f"RENAME TABLE {VERSION_TABLE} TO alembic_version"))
            else:
                await conn.execute(text(f"ALTER TABLE {VERSION_TABLE} RENAME TO alembic_version"))
            if engine.dialect.name == "postgresql":
                # The primary key's name is global to the schema there, and Alembic names it
                # after the table.
                await conn.execute(
                    text(
                        f"ALTER TABLE alembic_version RENAME CONSTRAINT {VERSION_TABLE}_pkc"
                        " TO alembic_version_pkc"
                    )
                )
    finally:
        await engine.dispose()


async def make_revision_0001_database(url: str) -> None:
    """An empty database exactly as statecore's revision 0001 left it: unprefixed tables and
    its revision in ``alembic_version``."""
    assert await upgrade_database(url, "0001") == "0001"
    await record_revision_the_old_way(url)
    assert await table_names(url) == UNPREFIXED | {"alembic_version"}
