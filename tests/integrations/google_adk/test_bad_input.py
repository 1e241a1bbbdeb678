"""Bad input to StatecoreSessionService: a typed error, nothing stored, the session healthy
afterwards. On memory, SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from google.adk.errors import StaleSessionError
from google.adk.sessions import Session

from statecore.core._errors import (
    ConflictError,
    ContentTooLargeError,
    InvalidIdentifierError,
    InvalidInputError,
)
from statecore.core._limits import MAX_MESSAGE_BYTES
from statecore.integrations.google_adk import StatecoreSessionService
from tests.integrations.google_adk.contract_cases import event
from tests.store_backends import open_backend

APP = "bad_input"
BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mariadb", id="mariadb", marks=pytest.mark.mariadb),
]


@pytest.fixture(params=BACKENDS)
async def service(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StatecoreSessionService]:
    async with open_backend(request.param, tmp_path, "adkbad") as store:
        yield StatecoreSessionService(store=store)


async def snapshot(service: StatecoreSessionService, session: Session) -> tuple[object, ...]:
    got = await service.get_session(app_name=APP, user_id=session.user_id, session_id=session.id)
    assert got is not None
    listed = await service.list_sessions(app_name=APP)
    user = await service.get_user_state(app_name=APP, user_id=session.user_id)
    return got.events, got.state, got.last_update_time, listed, user


@pytest.mark.parametrize(
    "state",
    [{"app:": 1}, {"user:": 1}, {"": 1}, {"temp:": 1}, {1: "not a text key"}, ["not", "a", "dict"]],
)
async def test_a_state_key_outside_adks_scopes_creates_nothing(
    service: StatecoreSessionService, state: object
) -> None:
    with pytest.raises(InvalidInputError):
        await service.create_session(app_name=APP, user_id="u1", state=state, session_id="s")  # type: ignore[arg-type]
    assert (await service.list_sessions(app_name=APP)).sessions == []
    assert await service.get_user_state(app_name=APP, user_id="u1") == {}
    # The id is still free.
    created = await service.create_session(app_name=APP, user_id="u1", session_id="s")
    assert created.id == "s"


@pytest.mark.parametrize("delta", [{"user:": 1}, {"app:": 2}, {"": 3}])
async def test_a_bad_state_delta_stores_nothing(
    service: StatecoreSessionService, delta: dict[str, int]
) -> None:
    session = await service.create_session(app_name=APP, user_id="u1", state={"k": 1})
    await service.append_event(session, event(text="first"))
    before = await snapshot(service, session)
    with pytest.raises(InvalidInputError, match=r"scope prefix|non-empty"):
        await service.append_event(session, event(text="bad", delta={**delta, "k": 9}))
    assert await snapshot(service, session) == before
    assert len(session.events) == 1
    await service.append_event(session, event(text="after", delta={"k": 2}))
    got = await service.get_session(app_name=APP, user_id="u1", session_id=session.id)
    assert got is not None and got.state == {"k": 2} and len(got.events) == 2


async def test_an_oversized_event_is_refused_whole(service: StatecoreSessionService) -> None:
    session = await service.create_session(app_name=APP, user_id="u1")
    before = await snapshot(service, session)
    huge = event(text="x" * (MAX_MESSAGE_BYTES + 1), delta={"user:seen": True, "k": 1})
    with pytest.raises(ContentTooLargeError, match="over the"):
        await service.append_event(session, huge)
    assert await snapshot(service, session) == before
    await service.append_event(session, event(text="small"))
    got = await service.get_session(app_name=APP, user_id="u1", session_id=session.id)
    assert got is not None and [e.content.parts[0].text for e in got.events] == ["small"]  # type: ignore[union-attr, index]


async def test_a_stale_session_is_refused_as_adk_and_statecore_errors(
    service: StatecoreSessionService,
) -> None:
    session = await service.create_session(app_name=APP, user_id="u1")
    stale = await service.get_session(app_name=APP, user_id="u1", session_id=session.id)
    assert stale is not None
    await service.append_event(session, event(text="winner", delta={"user:w": 1}))
    before = await snapshot(service, session)
    with pytest.raises(StaleSessionError) as caught:
        await service.append_event(stale, event(text="loser", delta={"user:w": 2, "app:x": 1}))
    assert isinstance(caught.value, ConflictError) and caught.value.code == "StaleSession"
    assert await snapshot(service, session) == before
    # Reloaded, the same writer goes on.
    fresh = await service.get_session(app_name=APP, user_id="u1", session_id=session.id)
    assert fresh is not None
    await service.append_event(fresh, event(text="again"))


@pytest.mark.parametrize(
    ("app", "user", "sid"),
    [("bad app", "u1", "s"), (APP, "u1", "has@at"), (APP, "u 1", "s"), (APP, "u1", "x" * 200)],
)
async def test_ids_statecore_cannot_name_are_refused(
    service: StatecoreSessionService, app: str, user: str, sid: str
) -> None:
    with pytest.raises(InvalidIdentifierError):
        await service.create_session(app_name=app, user_id=user, session_id=sid)
    assert (await service.list_sessions(app_name=APP)).sessions == []


async def test_the_service_needs_one_store() -> None:
    with pytest.raises(InvalidInputError):
        StatecoreSessionService()
    with pytest.raises(InvalidInputError):
        StatecoreSessionService(database_url=42)  # type: ignore[arg-type]
