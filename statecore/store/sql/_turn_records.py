"""Turn records in SQL: one narrow row per committed turn, (session_pk, turn_id) -> record.

Every turn reads its record (is this turn id committed?) and writes one, so both statements
are built once with bind parameters. The write is an insert that a duplicate turn id refuses:
on PostgreSQL and SQLite an ``ON CONFLICT DO NOTHING`` that changes no row, on MariaDB/MySQL
an insert in a savepoint that hits the primary key. A concurrent attempt of the same turn
waits on the session's header row (the lock order), then finds the record committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from statecore.core._errors import RevisionConflictError
from statecore.core._models import SessionRef
from statecore.store._base import TurnRecordStore
from statecore.store._inputs import (
    check_ref,
    checked_turn_id,
    decode_json,
    encode_turn_record,
)
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._batches import chunked
from statecore.store.sql._context import SqlContext
from statecore.store.sql._schema import sessions, turn_records

c = turn_records.c


@prebuilt_statements.prebuilt
def _get_statement() -> Any:
    """A record by its session's key and its turn id (``p_namespace``, ``p_agent_id``,
    ``p_session_id``, ``p_turn_id``), the header joined in: every turn looks its id up,
    often before anything else of the session is read."""
    s = sessions.c
    return (
        select(c.record)
        .select_from(turn_records.join(sessions, s.id == c.session_pk))
        .where(
            s.namespace == bindparam("p_namespace", type_=s.namespace.type),
            s.agent_id == bindparam("p_agent_id", type_=s.agent_id.type),
            s.session_id == bindparam("p_session_id", type_=s.session_id.type),
            c.turn_id == bindparam("p_turn_id", type_=c.turn_id.type),
        )
    )


@prebuilt_statements.prebuilt
def insert_statement(dialect: str) -> Any:
    """The insert of a new record (``p_session_pk``, ``p_turn_id``, ``p_record``). PostgreSQL
    and SQLite skip a duplicate key and change no row, which the caller reads as a conflict."""
    values = {
        "session_pk": bindparam("p_session_pk", type_=c.session_pk.type),
        "turn_id": bindparam("p_turn_id", type_=c.turn_id.type),
        "record": bindparam("p_record", type_=c.record.type),
    }
    if dialect == "postgresql":
        return postgresql.insert(turn_records).values(values).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(turn_records).values(values).on_conflict_do_nothing()
    return insert(turn_records).values(values)


def conflict(ref: SessionRef, turn_id: str) -> RevisionConflictError:
    """What inserting a record the turn already has raises."""
    return RevisionConflictError(
        f"turn {turn_id} of session {ref} is already committed; read its record instead",
        current=1,
        expected=0,
    )


class SqlTurnRecordStore(TurnRecordStore):
    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx

    async def get(self, ref: SessionRef, turn_id: str) -> Any | None:
        turn_id = checked_turn_id(ref, turn_id)
        params = {
            "p_namespace": ref.namespace,
            "p_agent_id": ref.agent_id,
            "p_session_id": ref.session_id,
            "p_turn_id": turn_id,
        }
        ctx = self._ctx
        if ctx.cached_session_row(ref) is not None:
            found = (await ctx.execute(_get_statement(), params)).scalar()
        else:
            # Often the turn's first read: its header comes along (SqlContext.read_for_turn).
            found = await ctx.read_for_turn(ref, turn_id)
        return None if found is None else decode_json(found)

    async def insert(self, ref: SessionRef, turn_id: str, value: Any) -> None:
        params = await self.insert_parameters(ref, turn_id, value)
        statement = insert_statement(self._ctx.dialect)
        if self._ctx.dialect == "mysql":
            inserted = await self._ctx.insert_unless_duplicate(statement, params)
        else:
            inserted = (await self._ctx.execute(statement, params)).rowcount == 1
        if not inserted:
            raise conflict(ref, turn_id)

    async def insert_parameters(self, ref: SessionRef, turn_id: str, value: Any) -> dict[str, Any]:
        """The bind parameters of ``insert_statement`` for ``insert(ref, turn_id, value)``,
        checked as ``insert`` checks them, with the session's header locked as ``insert``
        locks it. For a statement that carries the insert beside other writes."""
        turn_id = checked_turn_id(ref, turn_id)
        record = encode_turn_record(value)
        session = await self._ctx.session_row(ref, lock=True)
        return {"p_session_pk": session.id, "p_turn_id": turn_id, "p_record": record}

    async def count(self, ref: SessionRef) -> int:
        check_ref(ref)
        session = await self._ctx.find_session_row(ref)
        if session is None:
            return 0
        statement = select(func.count()).select_from(turn_records)
        return int(await self._ctx.conn.scalar(statement.where(c.session_pk == session.id)) or 0)

    async def records(self, ref: SessionRef) -> list[tuple[str, Any]]:
        check_ref(ref)
        session = await self._ctx.find_session_row(ref)
        if session is None:
            return []
        rows = await self._ctx.conn.execute(
            select(c.turn_id, c.record).where(c.session_pk == session.id).order_by(c.turn_id)
        )
        return [(row.turn_id, decode_json(row.record)) for row in rows]

    async def restore(self, ref: SessionRef, records: Sequence[tuple[str, Any]]) -> None:
        check_ref(ref)
        # A turn id given twice keeps its last record, like the KV restore.
        encoded = {
            checked_turn_id(ref, turn_id): encode_turn_record(value) for turn_id, value in records
        }
        session = await self._ctx.session_row(ref, lock=True)
        conn = self._ctx.conn
        for chunk in chunked(list(encoded)):
            await conn.execute(
                delete(turn_records).where(
                    c.session_pk == session.id,
                    c.turn_id.in_(chunk),
                )
            )
        rows = [
            {"session_pk": session.id, "turn_id": turn_id, "record": record}
            for turn_id, record in encoded.items()
        ]
        if rows:
            await conn.execute(insert(turn_records), rows)

    async def clear(self, ref: SessionRef) -> int:
        check_ref(ref)
        session = await self._ctx.find_session_row(ref, lock=True)
        if session is None:
            return 0
        removed = await self._ctx.conn.execute(
            delete(turn_records).where(c.session_pk == session.id)
        )
        return removed.rowcount
