"""Session headers, TTL expiry and the delete cascade, in memory."""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta

from statecore.core._models import SessionInfo, SessionRef, validate_identifier
from statecore.store._base import SessionStore
from statecore.store._inputs import (
    check_aware,
    check_page_limit,
    check_ref,
    check_session_listing,
    check_ttl_seconds,
)
from statecore.store.memory._context import TxContext, session_key
from statecore.store.memory._schema import SessionPartition


def idle_deadline(info: SessionInfo) -> datetime:
    return info.last_accessed + timedelta(seconds=info.ttl_seconds)


class MemorySessionStore(SessionStore):
    def __init__(self, ctx: TxContext) -> None:
        self._ctx = ctx

    async def ensure(self, ref: SessionRef, *, ttl_seconds: int | None = None) -> SessionInfo:
        check_ref(ref)
        if ttl_seconds is not None:
            ttl_seconds = int(check_ttl_seconds(ttl_seconds))
        ws, now = self._ctx.ws, self._ctx.now
        part = ws.sessions.writable(session_key(ref))
        if part is None:
            info = SessionInfo(
                ref=ref,
                created_at=now,
                last_accessed=now,
                ttl_seconds=ttl_seconds or self._ctx.default_ttl,
            )
            ws.sessions.put(session_key(ref), SessionPartition(info=info))
            return info.model_copy()
        changes: dict[str, object] = {"last_accessed": now}
        if ttl_seconds is not None:
            changes["ttl_seconds"] = ttl_seconds
        part.info = part.info.model_copy(update=changes)
        return part.info.model_copy()

    async def get(self, ref: SessionRef) -> SessionInfo | None:
        check_ref(ref)
        part = self._ctx.ws.sessions.get(session_key(ref))
        return None if part is None else part.info.model_copy()

    async def touch(self, ref: SessionRef) -> None:
        check_ref(ref)
        part = self._ctx.session_for_write(ref)
        part.info = part.info.model_copy(update={"last_accessed": self._ctx.now})

    async def list(
        self,
        namespace: str,
        *,
        agent_id: str | None = None,
        limit: int = 100,
        after: SessionRef | None = None,
    ) -> list[SessionRef]:
        check_session_listing(namespace, agent_id, limit, after)
        refs = sorted(
            (
                part.info.ref
                for (ns, agent, _), part in self._ctx.ws.sessions.items()
                if ns == namespace and (agent_id is None or agent == agent_id)
            ),
            key=lambda r: (r.agent_id, r.session_id),
        )
        if after is not None:
            refs = [
                r for r in refs if (r.agent_id, r.session_id) > (after.agent_id, after.session_id)
            ]
        return refs[:limit]

    async def expired(self, now: datetime, *, limit: int = 1000) -> builtins.list[SessionRef]:
        now = check_aware(now, "now")
        check_page_limit(limit)
        overdue = sorted(
            (idle_deadline(part.info), key, part.info.ref)
            for key, part in self._ctx.ws.sessions.items()
            if idle_deadline(part.info) < now
        )
        return [ref for _, _, ref in overdue[:limit]]

    async def delete(self, ref: SessionRef) -> bool:
        check_ref(ref)
        ws = self._ctx.ws
        existed = ws.sessions.delete(session_key(ref))
        # The cascade runs even without a header row, so nothing the session owned lingers.
        ws.kv.delete((ref.namespace, ref.owner))
        ws.states.delete((ref.namespace, ref.session_id, ref.agent_id))
        return existed

    async def delete_namespace(self, namespace: str) -> int:
        validate_identifier(namespace, "namespace")
        ws = self._ctx.ws
        sessions = [key for key, _ in ws.sessions.items() if key[0] == namespace]
        scopes = [key for key, _ in ws.kv.items() if key[0] == namespace]
        states = [key for key, _ in ws.states.items() if key[0] == namespace]
        for key in sessions:
            ws.sessions.delete(key)
        for scope in scopes:
            ws.kv.delete(scope)
        for state in states:
            ws.states.delete(state)
        return len(sessions)

    async def namespaces(self) -> builtins.list[str]:
        ws = self._ctx.ws
        found = {key[0] for key, _ in ws.sessions.items()}
        found.update(key[0] for key, rows in ws.kv.items() if rows)
        found.update(key[0] for key, _ in ws.states.items())
        return sorted(found)
