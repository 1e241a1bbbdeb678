"""Alembic migrations: upgrade from empty on every dialect, and the migrated schema is exactly
the one ``statecore.store.sql._schema`` declares, every table prefixed with ``statecore_``."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Integer, MetaData
from sqlalchemy.engine import Connection

from statecore.core._errors import MigrationError
from statecore.store._migrate import (
    HEAD_REVISION,
    current_revision,
    script_head,
    upgrade_database,
)
from statecore.store.sql import SqlStateStore
from statecore.store.sql._engine import create_store_engine
from statecore.store.sql._schema import TABLE_PREFIX, VERSION_TABLE, metadata
from tests.dbs import fresh_database
from tests.store.migration_helpers import ALL, PREFIXED, UNPREFIXED, downgrade, table_names


def test_head_constant_matches_the_shipped_scripts() -> None:
    assert script_head() == HEAD_REVISION


@pytest.mark.parametrize("dialect", ALL)
async def test_upgrade_from_empty_reaches_head(dialect: str) -> None:
    async with fresh_database(dialect, "mig") as url:
        assert await current_revision(url) is None

        assert await upgrade_database(url) == HEAD_REVISION
        assert await current_revision(url) == HEAD_REVISION
        # Every table statecore made carries its prefix, its version table included.
        assert await table_names(url) == PREFIXED | {VERSION_TABLE}

        # Upgrading a database already at head changes nothing.
        assert await upgrade_database(url) == HEAD_REVISION


@pytest.mark.parametrize("dialect", ALL)
async def test_downgrade_to_base_and_back(dialect: str) -> None:
    async with fresh_database(dialect, "mig") as url:
        await upgrade_database(url)
        await downgrade(url, "0001")
        assert await table_names(url) == UNPREFIXED | {VERSION_TABLE}
        assert await current_revision(url) == "0001"
        await downgrade(url, "base")
        assert await table_names(url) == {VERSION_TABLE}
        assert await current_revision(url) is None
        assert await upgrade_database(url) == HEAD_REVISION
        assert await _schema_diffs(url, metadata) == []


async def _schema_diffs(url: str, target: MetaData) -> list[object]:
    engine = create_store_engine(url)
    try:
        async with engine.connect() as conn:

            def diff(sync_conn: Connection) -> list[object]:
                context = MigrationContext.configure(
                    sync_conn,
                    opts={
                        "compare_type": True,
                        "compare_server_default": True,
                        "version_table": VERSION_TABLE,
                    },
                )
                return list(compare_metadata(context, target))

            return await conn.run_sync(diff)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("dialect", ALL)
async def test_migrated_database_matches_model_metadata(dialect: str) -> None:
    async with fresh_database(dialect, "cmp") as url:
        await upgrade_database(url)
        assert await _schema_diffs(url, metadata) == []


@pytest.mark.parametrize("dialect", ALL)
async def test_every_revision_in_turn_builds_the_model_metadata(dialect: str) -> None:
    """An empty database gets head's schema in one step; a database at 0001 gets there
    through the revisions. Both must end with exactly the same schema."""
    async with fresh_database(dialect, "cmp") as url:
        assert await upgrade_database(url, "0001") == "0001"
        assert await table_names(url) == UNPREFIXED | {VERSION_TABLE}
        assert await upgrade_database(url) == HEAD_REVISION
        assert await table_names(url) == PREFIXED | {VERSION_TABLE}
        assert await _schema_diffs(url, metadata) == []


@pytest.mark.parametrize("dialect", ALL)
async def test_schema_comparison_notices_a_drifted_model(dialect: str) -> None:
    """The comparison above can fail: a model that differs from the migration shows up."""
    drifted = MetaData(naming_convention=metadata.naming_convention)
    for table in metadata.sorted_tables:
        table.to_metadata(drifted)
    drifted.tables[TABLE_PREFIX + "hints"].c.text.type = Integer()
    drifted.tables[TABLE_PREFIX + "messages"].indexes.clear()
    async with fresh_database(dialect, "cmp") as url:
        await upgrade_database(url)
        diffs = [str(d) for d in await _schema_diffs(url, drifted)]
    assert any("'statecore_hints', 'text'" in d for d in diffs), diffs
    assert any("ix_statecore_messages_session_pk_cumulative_tokens" in d for d in diffs), diffs


@pytest.mark.parametrize("dialect", ALL)
async def test_connect_refuses_an_unmigrated_database(dialect: str) -> None:
    async with fresh_database(dialect, "chk") as url:
        with pytest.raises(MigrationError, match="statecore db upgrade"):
            await SqlStateStore.connect(url)
        # check_schema=False is the escape hatch for tools that migrate themselves.
        store = await SqlStateStore.connect(url, check_schema=False)
        await store.close()
        await upgrade_database(url)
        store = await SqlStateStore.connect(url)
        try:
            assert store.dialect == dialect
        finally:
            await store.close()
