"""The change feed in SQL: events numbered per namespace in commit order, without gaps.

Numbering: a commit's events take their numbers from the namespace's row in
``event_heads`` (``last_seq = last_seq + n``), which locks that row until the transaction
ends. A second commit in the same namespace waits at that row until the first has committed
(or rolled back, giving its numbers back), and only then takes the next numbers. So a number
becomes visible only after every smaller number of its namespace is visible or was never
used, and the reader's rule is simple: read ``seq > after`` in order, and nothing committed is
ever missed. The price is that commits of one namespace pass that row one at a time; the
recording runs last in the turn's transaction, so the row is held only for the few
statements up to the commit. SQLite has one writer at a time anyway.

PostgreSQL also sends ``NOTIFY statecore_events, '<namespace>'`` in the transaction, which the
server delivers at commit and never for a rollback: a follower there waits without polling.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Integer, String, bindparam, delete, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY

from statecore.core.change_events import ChangeEvent, NewEvent
from statecore.core.models import validate_identifier
from statecore.store.base import EventStore
from statecore.store.inputs import check_aware, check_int
from statecore.store.sql import direct
from statecore.store.sql.context import SqlContext
from statecore.store.sql.schema import TABLE_PREFIX, event_heads, events
from statecore.store.sql.types import UtcDateTime

#: The PostgreSQL channel new events are announced on; the payload is the namespace.
NOTIFY_CHANNEL = TABLE_PREFIX + "events"

e, h = events.c, event_heads.c
# Built once, with bound parameters: every commit runs them, and a statement built per call
# costs its cache-key walk each time (a third of the feed's CPU per turn, measured).
_INSERT = direct.register(insert(events))
_NUMBER = (
    update(event_heads)
    .where(h.namespace == bindparam("ns"))
    .values(last_seq=h.last_seq + bindparam("n"))
)
_NUMBER_RETURNING = direct.register(_NUMBER.returning(h.last_seq))
_NUMBER_AND_NOTIFY = _NUMBER.returning(h.last_seq, func.pg_notify(NOTIFY_CHANNEL, bindparam("ns")))
_LAST = select(h.last_seq).where(h.namespace == bindparam("ns"))
_APPEND_PG = text(
    f"""
    WITH head AS (
        UPDATE {event_heads.name} SET last_seq = last_seq + :n WHERE namespace = :ns
        RETURNING last_seq, pg_notify('{NOTIFY_CHANNEL}', :ns)
    )
    INSERT INTO {events.name}
        (namespace, seq, kind, agent_id, session_id, turn_id, detail, created_at)
    SELECT :ns, head.last_seq - :n + e.ord, e.kind, e.agent_id, e.session_id, e.turn_id,
        e.detail, :now
    FROM head, unnest(:kinds, :agents, :sessions, :turns, :details)
        WITH ORDINALITY AS e(kind, agent_id, session_id, turn_id, detail, ord)
    RETURNING seq
    """
).bindparams(
    bindparam("n", type_=Integer()),
    bindparam("kinds", type_=ARRAY(String())),
    bindparam("agents", type_=ARRAY(String())),
    bindparam("sessions", type_=ARRAY(String())),
    bindparam("turns", type_=ARRAY(String())),
    bindparam("details", type_=ARRAY(String())),
    bindparam("now", type_=UtcDateTime()),
)


class SqlEventStore(EventStore):
    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx

    async def _take_numbers(self, namespace: str, count: int) -> int:
        """Reserve ``count`` numbers; returns the first. Holds the head row until commit.

        One statement where the database returns the updated row (PostgreSQL also sends the
        NOTIFY from it: delivered at commit, never for a rollback); MariaDB reads it back."""
        conn, dialect = self._ctx.conn, self._ctx.dialect
        params = {"ns": namespace, "n": count}
        for _ in range(2):
            if dialect == "postgresql":
                found = await conn.scalar(_NUMBER_AND_NOTIFY, params)
            elif dialect == "sqlite":
                found = (await self._ctx.execute(_NUMBER_RETURNING, params)).scalar()
            else:
                found = None
                if (await conn.execute(_NUMBER, params)).rowcount:
                    found = await conn.scalar(_LAST, params)
            if found is not None:
                return int(found) - count + 1
            if await self._ctx.insert_unless_duplicate(
                insert(event_heads).values(namespace=namespace, last_seq=count)
            ):
                if dialect == "postgresql":
                    await conn.execute(select(func.pg_notify(NOTIFY_CHANNEL, namespace)))
                return 1
            # Another transaction created the row first (and has committed): update it.
        raise RuntimeError(f"could not number events of namespace {namespace!r}")

    async def append(self, namespace: str, new: Sequence[NewEvent]) -> int:
        validate_identifier(namespace, "namespace")
        if not new:
            return 0
        details = [event.detail_json() for event in new]
        if self._ctx.dialect == "postgresql":
            first = await self._append_in_one_statement(namespace, new, details)
            if first is not None:
                return first
        first = await self._take_numbers(namespace, len(new))
        now = self._ctx.now
        rows = [
            {
                "namespace": namespace,
                "seq": first + i,
                "kind": event.kind,
                "agent_id": event.agent_id,
                "session_id": event.session_id,
                "turn_id": event.turn_id,
                "detail": detail,
                "created_at": now,
            }
            for i, (event, detail) in enumerate(zip(new, details, strict=True))
        ]
        await self._ctx.execute(_INSERT, rows)
        return first

    async def _append_in_one_statement(
        self, namespace: str, new: Sequence[NewEvent], details: list[str]
    ) -> int | None:
        """PostgreSQL: number, notify and insert in one statement (every commit runs it, and
        each statement is a round trip and its share of CPU). None when the namespace has no
        numbering row yet: the first commit of a namespace takes the general path."""
        found = await self._ctx.conn.execute(
            _APPEND_PG,
            {
                "ns": namespace,
                "n": len(new),
                "kinds": [event.kind for event in new],
                "agents": [event.agent_id for event in new],
                "sessions": [event.session_id for event in new],
                "turns": [event.turn_id for event in new],
                "details": details,
                "now": self._ctx.now,
            },
        )
        numbers = found.scalars().all()
        return min(numbers) if numbers else None

    async def read(self, namespace: str, *, after: int = 0, limit: int = 500) -> list[ChangeEvent]:
        validate_identifier(namespace, "namespace")
        check_int(after, "after", minimum=0)
        check_int(limit, "limit", minimum=1, maximum=1000)
        rows = await self._ctx.conn.execute(
            select(events)
            .where(e.namespace == namespace, e.seq > after)
            .order_by(e.seq)
            .limit(limit)
        )
        return [
            ChangeEvent(
                namespace=row.namespace,
                seq=row.seq,
                kind=row.kind,
                agent_id=row.agent_id,
                session_id=row.session_id,
                turn_id=row.turn_id,
                detail=json.loads(row.detail),
                created_at=row.created_at,
            )
            for row in rows
        ]

    async def last_seq(self, namespace: str) -> int:
        validate_identifier(namespace, "namespace")
        found = await self._ctx.conn.scalar(select(h.last_seq).where(h.namespace == namespace))
        return int(found or 0)

    async def sweep(
        self,
        *,
        older_than: datetime | None = None,
        keep_last: int | None = None,
        namespace: str | None = None,
    ) -> int:
        conn = self._ctx.conn
        removed = 0
        scope = [] if namespace is None else [e.namespace == validate_identifier(namespace)]
        if older_than is not None:
            check_aware(older_than, "older_than")
            gone = await conn.execute(delete(events).where(e.created_at < older_than, *scope))
            removed += gone.rowcount
        if keep_last is not None:
            check_int(keep_last, "keep_last", minimum=0)
            heads = select(h.namespace, h.last_seq)
            if namespace is not None:
                heads = heads.where(h.namespace == namespace)
            for name, last in (await conn.execute(heads)).all():
                gone = await conn.execute(
                    delete(events).where(e.namespace == name, e.seq <= last - keep_last)
                )
                removed += gone.rowcount
        return removed
