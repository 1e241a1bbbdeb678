"""``StatecoreSessionService``: ADK's ``BaseSessionService`` on statecore's store.

A drop-in for ADK's ``InMemorySessionService`` and ``DatabaseSessionService`` on memory,
SQLite, PostgreSQL or MariaDB; where it lays ADK's sessions and scopes in the store is
described in ``statecore.integrations.google_adk._layout``. Every call is one transaction, and
``append_event`` refuses a stale session object with ADK's ``StaleSessionError`` on every
backend and across processes: the session header's version is checked and advanced in the
same transaction that stores the event, so of two writers holding the same revision exactly
one stores its event.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from google.adk.events.event import Event
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from typing_extensions import override

from statecore.core._errors import InvalidInputError, RevisionConflictError
from statecore.core._models import DEFAULT_NAMESPACE, SessionRef, validate_identifier
from statecore.integrations.google_adk import _writes as writes
from statecore.integrations.google_adk._layout import header_of, session_ref, set_revision
from statecore.integrations.google_adk._reads import build_session, load_session, shared_state
from statecore.store import MEMORY_URL, StateStore, StoreTransaction, open_store, run_transaction

T = TypeVar("T")

#: How often a write that lost a race on shared (app or user) state runs again.
MAX_SHARED_STATE_RETRIES = 8


class StatecoreSessionService(BaseSessionService):
    """ADK's session service on statecore.

    Args:
        database_url: ``memory://``, ``sqlite:///path``, ``postgresql://...`` or
            ``mysql://...``; the schema is migrated on first use. Or pass ``store``: an open
            ``StateStore`` the caller owns (and closes).
        namespace: the statecore namespace the app's sessions live in.
    """

    def __init__(
        self,
        *,
        database_url: str | None = None,
        store: StateStore | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> None:
        if (database_url is None) == (store is None):
            raise InvalidInputError("pass exactly one of database_url= or store=")
        if database_url is not None and not isinstance(database_url, str):
            raise InvalidInputError("database_url must be a string URL")
        self.namespace = validate_identifier(namespace, "namespace")
        self._url = database_url
        self._given_store = store
        # A SQL connection pool belongs to the event loop that opened it: one store per loop.
        self._stores: dict[int, StateStore] = {}

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        ref = session_ref(self.namespace, app_name, user_id, session_id or str(uuid.uuid4()))
        return await self._write(lambda tx: writes.create_session(tx, ref, user_id, state or {}))

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        ref = session_ref(self.namespace, app_name, user_id, session_id)
        return await run_transaction(
            await self._store(), lambda tx: load_session(tx, ref, user_id, config), read_only=True
        )

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        validate_identifier(app_name, "app_name")

        async def read(tx: StoreTransaction) -> list[Session]:
            found: list[Session] = []
            for doc in await tx.state.list(self.namespace):
                header = header_of(doc) if doc.agent_id == app_name else None
                if header is None or (user_id is not None and header.user_id != user_id):
                    continue
                ref = SessionRef(
                    namespace=self.namespace, agent_id=app_name, session_id=doc.task_id
                )
                shared = await shared_state(tx, self.namespace, app_name, header.user_id)
                found.append(build_session(ref, header, doc.version, [], *shared))
            return found

        sessions = await run_transaction(await self._store(), read, read_only=True)
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        ref = session_ref(self.namespace, app_name, user_id, session_id)

        async def delete(tx: StoreTransaction) -> None:
            session = await load_session(tx, ref, user_id, GetSessionConfig(num_recent_events=0))
            if session is not None:
                await tx.sessions.delete(ref)

        await run_transaction(await self._store(), delete)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        validate_identifier(app_name, "app_name")

        async def read(tx: StoreTransaction) -> dict[str, Any]:
            _, user = await shared_state(tx, self.namespace, app_name, user_id)
            return user

        return await run_transaction(await self._store(), read, read_only=True)

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        ref = session_ref(self.namespace, session.app_name, session.user_id, session.id)
        # ADK's order: temp: values reach the session object, never the store.
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        version = await self._write(lambda tx: writes.store_event(tx, ref, session, event))
        session.last_update_time = event.timestamp
        set_revision(session, version)
        return self._commit_event_to_session(session, event)

    # --- statecore's side --------------------------------------------------------------------

    async def close(self) -> None:
        """Close the stores this service opened (never a store passed in)."""
        stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            await store.close()

    async def _write(self, work: Callable[[StoreTransaction], Awaitable[T]]) -> T:
        """Run ``work`` in a transaction; when it lost a race on shared state (another
        session of the app or user wrote it first) run it again, from a fresh read."""
        store = await self._store()
        for attempt in range(MAX_SHARED_STATE_RETRIES):
            try:
                return await run_transaction(store, work)
            except RevisionConflictError:
                if attempt == MAX_SHARED_STATE_RETRIES - 1:
                    raise
                await asyncio.sleep(0.005 * (attempt + 1))
        raise AssertionError("unreachable")

    async def _store(self) -> StateStore:
        if self._given_store is not None:
            return self._given_store
        assert self._url is not None
        key = 0 if self._url.strip().lower() == MEMORY_URL else id(asyncio.get_running_loop())
        store = self._stores.get(key)
        if store is None:
            store = await open_store(self._url, migrate=True)
            self._stores[key] = store
        return store
