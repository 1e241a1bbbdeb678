"""Every stored row, read with plain SQL, so a test can prove what a call did not change.

``all_rows`` reads every table of the schema in primary-key order. ``rows_by_owner`` groups
the same rows by who owns them, so a test can show that work on one session, (task, agent)
scope or namespace left every other owner's rows exactly as they were. Tables are keyed by
their name without statecore's ``statecore_`` prefix (``"messages"``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from statecore.store.sql._schema import (
    TABLE_PREFIX,
    event_heads,
    events,
    kv_entries,
    metadata,
    scoped_states,
    sessions,
)

Rows = dict[str, list[tuple[Any, ...]]]
#: (namespace, agent_id, session_id or task_id) for a session or a (task, agent) scope, and
#: (namespace, "", "") for the KV shared by a namespace.
Owner = tuple[str, str, str]


async def all_rows(database_url: str) -> Rows:
    """Every row of every statecore table, by table name, in primary-key order."""
    engine = create_async_engine(database_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            rows: Rows = {}
            for table in metadata.sorted_tables:
                result = await conn.execute(select(table).order_by(*table.primary_key.columns))
                rows[_key(table)] = [tuple(row) for row in result.all()]
            return rows
    finally:
        await engine.dispose()


def _key(table: Table) -> str:
    return table.name.removeprefix(TABLE_PREFIX)


def _kv_owner(row: Any) -> Owner:
    namespace, owner = row.namespace, row.owner
    if owner == "":
        return (namespace, "", "")
    agent_id, session_id = owner.split("/")
    return (namespace, agent_id, session_id)


async def rows_by_owner(database_url: str) -> dict[Owner, Rows]:
    """Every row grouped by its owner. A session's rows (header, messages, hints, flow,
    orchestration, KV, and the scoped state of (task_id=session_id, agent_id)) share the
    owner (namespace, agent_id, session_id); a namespace's change feed is owned by
    ``feed_owner(namespace)``."""
    engine = create_async_engine(database_url, poolclass=NullPool)
    grouped: dict[Owner, Rows] = defaultdict(lambda: defaultdict(list))
    try:
        async with engine.connect() as conn:
            owners: dict[int, Owner] = {}
            for row in (await conn.execute(select(sessions).order_by(sessions.c.id))).all():
                owners[row.id] = (row.namespace, row.agent_id, row.session_id)
                grouped[owners[row.id]][_key(sessions)].append(tuple(row))
            for table in metadata.sorted_tables:
                if table is sessions:
                    continue
                result = await conn.execute(select(table).order_by(*table.primary_key.columns))
                for row in result.all():
                    if table is events or table is event_heads:
                        owner = feed_owner(row.namespace)
                    elif table is kv_entries:
                        owner = _kv_owner(row)
                    elif table is scoped_states:
                        owner = (row.namespace, row.agent_id, row.task_id)
                    else:
                        owner = owners[row.session_pk]
                    grouped[owner][_key(table)].append(tuple(row))
    finally:
        await engine.dispose()
    return {owner: dict(tables) for owner, tables in grouped.items()}


def feed_owner(namespace: str) -> Owner:
    """The owner of a namespace's change feed (its events and its numbering row): every
    committed change of the namespace adds to it, and nothing of another namespace may."""
    return (namespace, "*feed", "")


def without(grouped: dict[Owner, Rows], *owners: Owner) -> dict[Owner, Rows]:
    """``grouped`` minus the given owners: what a call on those owners must leave alone."""
    return {owner: rows for owner, rows in grouped.items() if owner not in owners}
