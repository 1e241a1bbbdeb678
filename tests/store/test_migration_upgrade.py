"""Upgrading a database statecore migrated before its tables were prefixed, with data in it,
and sharing a database with an application that has its own ``sessions``, ``messages`` and
``alembic_version``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import column, table, text
from sqlalchemy.sql.expression import Executable

from statecore.core._errors import MigrationError
from statecore.core._models import SessionRef
from statecore.store import open_store
from statecore.store._migrate import HEAD_REVISION, current_revision, upgrade_database
from statecore.store.sql._engine import create_store_engine
from statecore.store.sql._schema import VERSION_TABLE
from tests.dbs import fresh_database
from tests.sql_rows import all_rows
from tests.store.bad_input import populate
from tests.store.helpers import snapshot, user
from tests.store.migration_helpers import (
    ALL,
    PREFIXED,
    UNPREFIXED,
    downgrade,
    make_revision_0001_database,
    record_revision_the_old_way,
    table_names,
)

NS = "upgrade"
REF = SessionRef(namespace=NS, agent_id="agent", session_id="s1")
SIBLING = SessionRef(namespace=NS, agent_id="agent", session_id="s2")
AT = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


async def _execute(url: str, *statements: tuple[str, dict[str, Any]] | Executable) -> None:
    engine = create_store_engine(url)
    try:
        async with engine.begin() as conn:
            for statement in statements:
                if isinstance(statement, tuple):
                    await conn.execute(text(statement[0]), statement[1])
                else:
                    await conn.execute(statement)
    finally:
        await engine.dispose()


async def _fetch(url: str, statement: str) -> list[tuple[Any, ...]]:
    engine = create_store_engine(url)
    try:
        async with engine.connect() as conn:
            return [tuple(row) for row in (await conn.execute(text(statement))).all()]
    finally:
        await engine.dispose()


@pytest.mark.parametrize("dialect", ALL)
async def test_upgrade_from_0001_keeps_every_row(dialect: str) -> None:
    """Rows written through the store survive 0002 -> 0001 (old names, old version table)
    -> upgrade, byte for byte, and the store reads them all back."""
    async with fresh_database(dialect, "upg") as url:
        store = await open_store(url, migrate=True)
        try:
            await populate(store, REF, SIBLING)
            async with store.transaction() as tx:
                gone = await tx.conversation.add_hint(REF, "removed before the upgrade")
                assert await tx.conversation.remove_hint(REF, gone.id)
            shown = await snapshot(store, NS, [REF, SIBLING])
        finally:
            await store.close()
        rows = await all_rows(url)
        assert rows["messages"] and rows["kv_entries"] and rows["scoped_states"]

        await downgrade(url, "0001")
        await record_revision_the_old_way(url)
        assert await table_names(url) == UNPREFIXED | {"alembic_version"}
        assert await current_revision(url) == "0001"
        with pytest.raises(MigrationError, match="revision 0001"):
            await open_store(url)

        assert await upgrade_database(url) == HEAD_REVISION
        assert await table_names(url) == PREFIXED | {VERSION_TABLE}
        # Every row but the change feed's: a downgrade below 0005 drops the feed's tables
        # (the feed is the history of one database; an upgrade starts it anew).
        upgraded = await all_rows(url)
        assert upgraded.pop("events") == [] and upgraded.pop("event_heads") == []
        assert rows.pop("events") and rows.pop("event_heads")
        assert upgraded == rows
        store = await open_store(url)
        try:
            assert await snapshot(store, NS, [REF, SIBLING]) == shown
            async with store.transaction() as tx:
                stored = await tx.conversation.append(REF, "t3", [user("after the upgrade")])
                hint = await tx.conversation.add_hint(REF, "new")
            assert stored[0].seq == shown[str(REF)]["info"]["last_seq"] + 1
            # A removed hint's id is never handed out again, across the upgrade too.
            assert hint.id > gone.id
        finally:
            await store.close()


@pytest.mark.parametrize("dialect", ALL)
async def test_upgrade_of_a_database_built_by_revision_0001(dialect: str) -> None:
    """A database built by 0001 alone (never by 0002's downgrade), rows written in SQL."""
    async with fresh_database(dialect, "old") as url:
        await make_revision_0001_database(url)
        session = (
            "INSERT INTO sessions (id, namespace, agent_id, session_id, system_prompt, last_seq,"
            " message_count, token_total, window_start_seq, created_at, last_accessed,"
            " ttl_seconds, expires_at) VALUES (7, :ns, 'agent', 's1', 'be brief', 2, 2, 20, 1,"
            " :at, :at, 600, :at)"
        )
        message = (
            "INSERT INTO messages (session_pk, seq, turn_id, idx, role, content, tokens,"
            " cumulative_tokens, created_at) VALUES (7, :seq, 't1', :idx, :role, :content, 10,"
            " :total, :at)"
        )
        at = {"at": AT.replace(tzinfo=None) if dialect != "postgresql" else AT}
        await _execute(
            url,
            (session, {"ns": NS, **at}),
            (message, {"seq": 1, "idx": 0, "role": "user", "content": "hi", "total": 10, **at}),
            (
                message,
                {"seq": 2, "idx": 1, "role": "assistant", "content": "hello", "total": 20, **at},
            ),
            ("INSERT INTO hints (session_pk, text, created_at) VALUES (7, 'tea', :at)", at),
        )
        # Built with SQLAlchemy Core: "key" is a reserved word on MariaDB, quoted per dialect.
        kv = table(
            "kv_entries",
            *(column(name) for name in ("namespace", "owner", "bucket", "key", "kind")),
            *(column(name) for name in ("value", "revision", "created_at", "updated_at")),
        )
        await _execute(
            url,
            kv.insert().values(
                namespace=NS,
                owner="agent/s1",
                bucket="prefs",
                key="theme",
                kind="json",
                value=b'"dark"',
                revision=3,
                created_at=at["at"],
                updated_at=at["at"],
            ),
        )

        assert await upgrade_database(url) == HEAD_REVISION
        assert "alembic_version" not in await table_names(url)
        store = await open_store(url)
        try:
            async with store.transaction() as tx:
                info = await tx.sessions.get(REF)
                messages = await tx.conversation.messages(REF)
                hints = await tx.conversation.hints(REF)
                theme = await tx.kv.get(REF.kv_scope, "prefs", "theme")
                await tx.sessions.ensure(REF.model_copy(update={"session_id": "s9"}))
                listed = await tx.sessions.list(NS)
        finally:
            await store.close()
        assert info is not None and (info.last_seq, info.token_total) == (2, 20)
        assert info.last_accessed == AT
        assert [(m.seq, m.role, m.content) for m in messages] == [
            (1, "user", "hi"),
            (2, "assistant", "hello"),
        ]
        assert [h.text for h in hints] == ["tea"]
        assert theme is not None and (theme.value, theme.revision) == ("dark", 3)
        assert [r.session_id for r in listed] == ["s1", "s9"]
        if dialect == "postgresql":
            sequences = await _fetch(url, "SELECT relname FROM pg_class WHERE relkind = 'S'")
            assert all(name.startswith("statecore_") for (name,) in sequences), sequences


HOST_TABLES = {
    "sqlite": [
        "CREATE TABLE sessions (id INTEGER PRIMARY KEY, owner VARCHAR(40) NOT NULL)",
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, body VARCHAR(200) NOT NULL)",
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
    ],
    "postgresql": [
        "CREATE TABLE sessions (id SERIAL PRIMARY KEY, owner VARCHAR(40) NOT NULL)",
        "CREATE TABLE messages (id SERIAL PRIMARY KEY, body VARCHAR(200) NOT NULL)",
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
    ],
    "mysql": [
        "CREATE TABLE sessions (id INTEGER AUTO_INCREMENT PRIMARY KEY, owner VARCHAR(40) NOT NULL)",
        "CREATE TABLE messages (id INTEGER AUTO_INCREMENT PRIMARY KEY, body VARCHAR(200) NOT NULL)",
        "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
    ],
}


async def _host_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: await _fetch(url, f"SELECT * FROM {table} ORDER BY 1")
        for table in ("sessions", "messages", "alembic_version")
    }


@pytest.mark.parametrize("dialect", ALL)
# "0001" is also statecore's first revision id: the application's table must be left alone
# even when its revision looks like one of statecore's.
@pytest.mark.parametrize("host_revision", ["0001", "3f9c2ab1e7d4"])
async def test_an_applications_own_tables_survive_statecores_migrations(
    dialect: str, host_revision: str
) -> None:
    async with fresh_database(dialect, "host") as url:
        statements = [(create, {}) for create in HOST_TABLES[dialect]]
        await _execute(
            url,
            *statements,
            ("INSERT INTO sessions (owner) VALUES ('alice'), ('bob')", {}),
            ("INSERT INTO messages (body) VALUES ('the application''s own row')", {}),
            ("INSERT INTO alembic_version (version_num) VALUES (:v)", {"v": host_revision}),
        )
        host = await _host_rows(url)
        assert await current_revision(url) is None

        store = await open_store(url, migrate=True)
        try:
            await populate(store, REF, SIBLING)
        finally:
            await store.close()
        assert await current_revision(url) == HEAD_REVISION
        assert await _host_rows(url) == host
        assert await table_names(url) == (
            PREFIXED | {VERSION_TABLE, "sessions", "messages", "alembic_version"}
        )

        # Revision 0001's names are the application's: going back there is refused up front.
        with pytest.raises(MigrationError, match="cannot downgrade below revision 0002"):
            await downgrade(url, "base")
        assert await current_revision(url) == HEAD_REVISION
        assert await _host_rows(url) == host
        assert await upgrade_database(url) == HEAD_REVISION
        assert await _host_rows(url) == host
