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
from typing import Any

from sqlalchemy import String, bindparam, delete, func, insert, select, true, update
from sqlalchemy.dialects.postgresql import ARRAY

from statecore.core._change_events import ChangeEvent, NewEvent
from statecore.core._models import validate_identifier
from statecore.store._base import EventStore
from statecore.store._inputs import check_aware, check_int
from statecore.store.sql import _prebuilt_statements as prebuilt_statements
from statecore.store.sql._context import SqlContext
from statecore.store.sql._schema import TABLE_PREFIX, event_heads, events

#: The PostgreSQL channel new events are announced on; the payload is the namespace.
NOTIFY_CHANNEL = TABLE_PREFIX + "events"

e, h = events.c, event_heads.c
# Built once, with bound parameters: every commit runs them, and a statement built per call
# costs its cache-key walk each time (a third of the feed's CPU per turn, measured).
_INSERT = prebuilt_statements.register(insert(events))
_NUMBER = (
    update(event_heads)
    .where(h.namespace == bindparam("ns"))
    .values(last_seq=h.last_seq + bindparam("n"))
)
_NUMBER_RETURNING = prebuilt_statements.register(_NUMBER.returning(h.last_seq))
_NUMBER_AND_NOTIFY = _NUMBER.returning(h.last_seq, func.pg_notify(NOTIFY_CHANNEL, bindparam("ns")))
_LAST = select(h.last_seq).where(h.namespace == bindparam("ns"))


def feed_cte() -> Any:
    """PostgreSQL: a commit's events numbered, announced and inserted by the CTE ``feed``
    (returning their numbers), which reads the CTE ``head`` (the namespace's numbering row
    moved on by ``n``, with the NOTIFY) and so brings it into any statement it joins; bind
    parameters as ``feed_parameters`` makes them. Neither writes anything when the
    namespace has no numbering row yet: ``feed`` then returns no number, and the general
    path creates the row."""
    ns = bindparam("ns", type_=h.namespace.type)
    n = bindparam("n", type_=h.last_seq.type)
    head = (
        update(event_heads)
        .where(h.namespace == ns)
        .values(last_seq=h.last_seq + n)
        .returning(h.last_seq, func.pg_notify(NOTIFY_CHANNEL, ns).label("notified"))
        .cte("head")
    )
    columns = ("kind", "agent_id", "session_id", "turn_id", "detail")
    given = func.unnest(*(bindparam(f"{c}s", type_=ARRAY(String())) for c in columns))
    new = given.table_valued(*columns, with_ordinality="ord").render_derived(name="new")
    rows = select(
        ns,
        head.c.last_seq - n + new.c.ord,
        *(new.c[c] for c in columns),
        bindparam("now", type_=e.created_at.type),
    ).select_from(head.join(new, true()))
    return (
        insert(events)
        .from_select(["namespace", "seq", *columns, "created_at"], rows)
        .returning(e.seq)
        .cte("feed")
    )


@prebuilt_statements.prebuilt
def _append_statement() -> Any:
    """PostgreSQL: ``feed_cte`` as a statement of its own, returning the first number."""
    return select(func.min(feed_cte().c.seq))


def feed_parameters(namespace: str, new: Sequence[NewEvent], now: datetime) -> dict[str, Any]:
    """The bind parameters of ``feed_cte`` for ``new`` events of ``namespace``."""
    return {
        "ns": namespace,
        "n": len(new),
        "kinds": [event.kind for event in new],
        "agent_ids": [event.agent_id for event in new],
        "session_ids": [event.session_id for event in new],
        "turn_ids": [event.turn_id for event in new],
        "details": [event.detail_json() for event in new],
        "now": now,
    }


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
        if self._ctx.dialect == "postgresql":
            # Number, notify and insert in one statement: every commit runs it, and each
            # statement is a round trip and its share of CPU.
            parameters = feed_parameters(namespace, new, self._ctx.now)
            first = (await self._ctx.execute(_append_statement(), parameters)).scalar()
            if first is not None:
                return int(first)
        return await self.append_in_steps(namespace, new)

    async def append_in_steps(self, namespace: str, new: Sequence[NewEvent]) -> int:
        """``append`` as every database can run it: numbers taken first (creating the
        namespace's numbering row on its first commit), then the events inserted."""
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
                "detail": event.detail_json(),
                "created_at": now,
            }
            for i, event in enumerate(new)
        ]
        await self._ctx.execute(_INSERT, rows)
        return first

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
