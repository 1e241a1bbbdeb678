"""The session service an ADK runner sees inside a statecore turn.

It holds the one session the turn runs on, loaded from the store when the turn began, and
keeps every event the run appends in memory (ADK's own bookkeeping applies: state deltas,
``temp:`` values on the object only). The turn's activity then commits those events with the
turn record in one transaction; nothing reaches the store from here.
"""

from __future__ import annotations

from typing import Any

from google.adk.events.event import Event
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from typing_extensions import override

from statecore.core._errors import InvalidInputError


class TurnBoundSessionService(BaseSessionService):
    """One session, read when the turn began; appends are buffered in ``added``."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.added: list[Event] = []

    def _is_ours(self, app_name: str, user_id: str, session_id: str) -> bool:
        s = self.session
        return (s.app_name, s.user_id, s.id) == (app_name, user_id, session_id)

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        raise InvalidInputError(
            "inside a statecore turn the session already exists; an agent cannot create another"
        )

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        return self.session if self._is_ours(app_name, user_id, session_id) else None

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        s = self.session
        if s.app_name != app_name or user_id not in (None, s.user_id):
            return ListSessionsResponse()
        return ListSessionsResponse(sessions=[s.model_copy(update={"events": []})])

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        raise InvalidInputError(
            "a statecore turn cannot delete its session; send the session the reset signal"
        )

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        if session is not self.session:
            raise InvalidInputError("inside a statecore turn, events go to the turn's session")
        appended = await super().append_event(session, event)
        if not appended.partial:
            self.added.append(appended)
        return appended
