"""Scoped state in SQL: one versioned JSON document per (namespace, task_id, agent_id).

The document is serialised and measured before any statement runs, so a document over the
MAX_STATE_BYTES limit (16 MiB, see docs/large_values.md) raises StateTooLargeError with
nothing written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import and_, delete, insert, select, tuple_, update
from sqlalchemy.engine import RowMapping

from statecore.core._errors import AlreadyExistsError
from statecore.core._models import ScopedState
from statecore.store._inputs import (
    RestoredState,
    check_state_version,
    decode_json,
)
from statecore.store._state_contracts import ScopedStateStore
from statecore.store.sql._batches import chunked
from statecore.store.sql._context import SqlContext
from statecore.store.sql._schema import scoped_states

c = scoped_states.c


def _the_scope(namespace: str, task_id: str, agent_id: str) -> Any:
    return and_(c.namespace == namespace, c.task_id == task_id, c.agent_id == agent_id)


def _out(values: RowMapping | Mapping[str, Any]) -> ScopedState:
    """A ScopedState from a row's mapping or from the values just written (no re-read)."""
    return ScopedState(
        namespace=values["namespace"],
        task_id=values["task_id"],
        agent_id=values["agent_id"],
        state=decode_json(values["document"]),
        version=values["version"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
    )


class SqlScopedStateStore(ScopedStateStore):
    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx

    async def _lock_session(self, namespace: str, task_id: str, agent_id: str) -> None:
        # The document of (task_id, agent_id) belongs to that agent's session task_id: its
        # writers start at the session's header row, like every writer of a session's rows.
        await self._ctx.lock_session(namespace, agent_id, task_id)

    async def _create(
        self, namespace: str, task_id: str, agent_id: str, document: str
    ) -> ScopedState:
        self._ctx.check_fits_statement(document, "state")
        await self._lock_session(namespace, task_id, agent_id)
        now = self._ctx.now
        values = {
            "namespace": namespace,
            "task_id": task_id,
            "agent_id": agent_id,
            "document": document,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        if not await self._ctx.insert_unless_duplicate(insert(scoped_states).values(values)):
            raise AlreadyExistsError(
                f"task {task_id} / agent {agent_id} already has state; update it instead",
                task_id=task_id,
                agent_id=agent_id,
            )
        return _out(values)

    async def _get(self, namespace: str, task_id: str, agent_id: str) -> ScopedState | None:
        row = (
            await self._ctx.conn.execute(
                select(scoped_states).where(_the_scope(namespace, task_id, agent_id))
            )
        ).first()
        return None if row is None else _out(row._mapping)

    async def _update(
        self,
        namespace: str,
        task_id: str,
        agent_id: str,
        document: str,
        expected_version: int | None,
    ) -> ScopedState:
        self._ctx.check_fits_statement(document, "state")
        await self._lock_session(namespace, task_id, agent_id)
        conn = self._ctx.conn
        current = (
            await conn.execute(
                select(c.id, c.version, c.created_at)
                .where(_the_scope(namespace, task_id, agent_id))
                .with_for_update()
            )
        ).first()
        current = check_state_version(current, expected_version, task_id, agent_id)
        values = {
            "document": document,
            "version": current.version + 1,
            "updated_at": self._ctx.now,
        }
        await conn.execute(update(scoped_states).where(c.id == current.id).values(values))
        scope = {"namespace": namespace, "task_id": task_id, "agent_id": agent_id}
        return _out({**scope, "created_at": current.created_at, **values})

    async def _delete(self, namespace: str, task_id: str, agent_id: str) -> bool:
        await self._lock_session(namespace, task_id, agent_id)
        removed = await self._ctx.conn.execute(
            delete(scoped_states).where(_the_scope(namespace, task_id, agent_id))
        )
        return removed.rowcount > 0

    async def _list(self, namespace: str, task_id: str | None) -> list[ScopedState]:
        statement = select(scoped_states).where(c.namespace == namespace)
        if task_id is not None:
            statement = statement.where(c.task_id == task_id)
        rows = await self._ctx.conn.execute(statement.order_by(c.task_id, c.agent_id))
        return [_out(row._mapping) for row in rows]

    async def _restore(self, states: list[RestoredState]) -> None:
        rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        for state in states:
            self._ctx.check_fits_statement(state.document, "state")
            # A scope given twice keeps its last document.
            rows[(state.namespace, state.task_id, state.agent_id)] = {
                "namespace": state.namespace,
                "task_id": state.task_id,
                "agent_id": state.agent_id,
                "document": state.document,
                "version": state.version,
                "created_at": state.created_at,
                "updated_at": state.updated_at,
            }
        for namespace, task_id, agent_id in sorted(rows):
            await self._lock_session(namespace, task_id, agent_id)
        for chunk in chunked(list(rows)):
            await self._ctx.conn.execute(
                delete(scoped_states).where(tuple_(c.namespace, c.task_id, c.agent_id).in_(chunk))
            )
        for document in rows.values():
            # One row per statement: documents can be up to MAX_STATE_BYTES each.
            await self._ctx.conn.execute(insert(scoped_states).values(document))
