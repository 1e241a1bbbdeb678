"""Session header rows, the idle clock, and the delete cascade, in SQL."""

from __future__ import annotations

import builtins
from datetime import datetime

from sqlalchemy import and_, delete, or_, select, union

from statecore.core._models import SessionInfo, SessionRef, validate_identifier
from statecore.store._base import SessionStore
from statecore.store._inputs import (
    check_aware,
    check_page_limit,
    check_ref,
    check_session_listing,
    check_ttl_seconds,
)
from statecore.store.sql._context import SqlContext
from statecore.store.sql._schema import (
    flow_checkpoints,
    hints,
    kv_entries,
    messages,
    orchestration_states,
    scoped_states,
    sessions,
    turn_records,
)
from statecore.store.sql._session_expiry import expiry
from statecore.store.sql._session_header import session_info
from statecore.store.sql._upsert import insert_or_ignore

#: Tables whose rows belong to one session through ``session_pk``. They are deleted
#: explicitly (the foreign keys also cascade) so the cascade never depends on a SQLite
#: connection having turned foreign keys on.
_SESSION_CHILDREN = (messages, hints, flow_checkpoints, orchestration_states, turn_records)
_SESSION_KEY = ("namespace", "agent_id", "session_id")


class SqlSessionStore(SessionStore):
    def __init__(self, ctx: SqlContext) -> None:
        self._ctx = ctx

    async def ensure(self, ref: SessionRef, *, ttl_seconds: int | None = None) -> SessionInfo:
        check_ref(ref)
        if ttl_seconds is not None:
            ttl_seconds = int(check_ttl_seconds(ttl_seconds))
        ctx, now = self._ctx, self._ctx.now
        row = await ctx.find_session_row(ref, lock=True)
        if row is None:
            ttl = ttl_seconds or ctx.default_ttl
            values = {
                "namespace": ref.namespace,
                "agent_id": ref.agent_id,
                "session_id": ref.session_id,
                "last_seq": 0,
                "message_count": 0,
                "token_total": 0,
                "window_start_seq": 1,
                "created_at": now,
                "last_accessed": now,
                "ttl_seconds": ttl,
                "expires_at": expiry(now, ttl),
            }
            # A concurrent ensure may create it first: then its row is the one we touch.
            await ctx.conn.execute(insert_or_ignore(ctx.dialect, sessions, values, _SESSION_KEY))
            row = await ctx.session_row(ref, lock=True)
        ttl = ttl_seconds if ttl_seconds is not None else row.ttl_seconds
        # Several writers of one transaction ensure the session; the clock moves once.
        if (row.last_accessed, row.ttl_seconds) != (now, ttl):
            ctx.touch_session(row, last_accessed=now, ttl_seconds=ttl, expires_at=expiry(now, ttl))
        return session_info(row, ref)

    async def get(self, ref: SessionRef) -> SessionInfo | None:
        check_ref(ref)
        row = await self._ctx.find_session_row(ref)
        return None if row is None else session_info(row, ref)

    async def touch(self, ref: SessionRef) -> None:
        check_ref(ref)
        row = await self._ctx.session_row(ref, lock=True)
        now = self._ctx.now
        if row.last_accessed != now:
            await self._ctx.update_session(
                row, last_accessed=now, expires_at=expiry(now, row.ttl_seconds)
            )

    async def list(
        self,
        namespace: str,
        *,
        agent_id: str | None = None,
        limit: int = 100,
        after: SessionRef | None = None,
    ) -> list[SessionRef]:
        check_session_listing(namespace, agent_id, limit, after)
        c = sessions.c
        statement = select(c.agent_id, c.session_id).where(c.namespace == namespace)
        if agent_id is not None:
            statement = statement.where(c.agent_id == agent_id)
        if after is not None:
            statement = statement.where(
                or_(
                    c.agent_id > after.agent_id,
                    and_(c.agent_id == after.agent_id, c.session_id > after.session_id),
                )
            )
        statement = statement.order_by(c.agent_id, c.session_id).limit(limit)
        rows = await self._ctx.conn.execute(statement)
        return [
            SessionRef(namespace=namespace, agent_id=agent, session_id=session)
            for agent, session in rows
        ]

    async def expired(self, now: datetime, *, limit: int = 1000) -> builtins.list[SessionRef]:
        now = check_aware(now, "now")
        check_page_limit(limit)
        c = sessions.c
        await self._ctx.send_touches()
        rows = await self._ctx.conn.execute(
            select(c.namespace, c.agent_id, c.session_id)
            .where(c.expires_at < now)
            .order_by(c.expires_at, c.namespace, c.agent_id, c.session_id)
            .limit(limit)
        )
        return [SessionRef(namespace=ns, agent_id=a, session_id=s) for ns, a, s in rows]

    async def delete(self, ref: SessionRef) -> bool:
        check_ref(ref)
        conn = self._ctx.conn
        row = await self._ctx.find_session_row(ref, lock=True)
        if row is not None:
            for table in _SESSION_CHILDREN:
                await conn.execute(delete(table).where(table.c.session_pk == row.id))
            await conn.execute(delete(sessions).where(sessions.c.id == row.id))
            self._ctx.forget_sessions()
        # Owned rows outside the session's foreign keys go even when the header is missing,
        # so nothing the session owned can linger.
        await conn.execute(
            delete(kv_entries).where(
                kv_entries.c.namespace == ref.namespace, kv_entries.c.owner == ref.owner
            )
        )
        await conn.execute(
            delete(scoped_states).where(
                scoped_states.c.namespace == ref.namespace,
                scoped_states.c.task_id == ref.session_id,
                scoped_states.c.agent_id == ref.agent_id,
            )
        )
        return row is not None

    async def delete_namespace(self, namespace: str) -> int:
        validate_identifier(namespace, "namespace")
        conn = self._ctx.conn
        in_namespace = select(sessions.c.id).where(sessions.c.namespace == namespace)
        # Headers first, as every writer of a session's rows does (see SqlContext.lock_session).
        await conn.execute(in_namespace.order_by(sessions.c.id).with_for_update())
        for table in _SESSION_CHILDREN:
            await conn.execute(delete(table).where(table.c.session_pk.in_(in_namespace)))
        removed = await conn.execute(delete(sessions).where(sessions.c.namespace == namespace))
        self._ctx.forget_sessions()
        await conn.execute(delete(kv_entries).where(kv_entries.c.namespace == namespace))
        await conn.execute(delete(scoped_states).where(scoped_states.c.namespace == namespace))
        return removed.rowcount

    async def namespaces(self) -> builtins.list[str]:
        found = await self._ctx.conn.execute(
            union(
                select(sessions.c.namespace),
                select(kv_entries.c.namespace),
                select(scoped_states.c.namespace),
            )
        )
        return sorted(found.scalars())
