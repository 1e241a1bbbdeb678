"""ADK's session-service contract, as cases any ``BaseSessionService`` can be run against.

Written from ADK's documentation (``BaseSessionService``'s docstrings, the sessions guide) and
from what its own services do; each case says what it checks. ``Services.other`` is a second
service instance on the same storage, as another process would open it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event, EventActions
from google.adk.sessions import Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from tests.integrations.google_adk.services import Services

Case = Callable[[Services], Awaitable[None]]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


def event(
    author: str = "user",
    text: str | None = "hello",
    *,
    delta: dict[str, Any] | None = None,
    timestamp: float | None = None,
    invocation: str = "inv-1",
) -> Event:
    content = (
        types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)])
        if text is not None
        else None
    )
    fields: dict[str, Any] = {}
    if timestamp is not None:
        fields["timestamp"] = timestamp
    return Event(
        author=author,
        invocation_id=invocation,
        content=content,
        actions=EventActions(state_delta=dict(delta or {})),
        **fields,
    )


async def fresh(s: Services, user: str = "u1", **kw: Any) -> Session:
    return await s.service.create_session(app_name=s.app, user_id=user, **kw)


async def reload(s: Services, session: Session, *, other: bool = False, **kw: Any) -> Session:
    service = s.other if other else s.service
    got = await service.get_session(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id, **kw
    )
    assert got is not None
    return got


@case
async def create_returns_an_empty_session_with_its_ids(s: Services) -> None:
    session = await fresh(s, session_id="given-id")
    assert (session.app_name, session.user_id, session.id) == (s.app, "u1", "given-id")
    assert session.events == []
    assert session.last_update_time > 0


@case
async def create_without_an_id_generates_a_unique_one(s: Services) -> None:
    a, b = await fresh(s), await fresh(s)
    assert a.id and b.id and a.id != b.id


@case
async def create_with_a_taken_id_raises_already_exists(s: Services) -> None:
    await fresh(s, session_id="taken", state={"k": 1})
    try:
        await fresh(s, session_id="taken", state={"k": 2})
    except AlreadyExistsError:
        pass
    else:
        raise AssertionError("a second create_session with the same id succeeded")
    again = await reload(s, Session(id="taken", app_name=s.app, user_id="u1"))
    assert again.state == {"k": 1}


@case
async def the_same_session_id_for_two_users_is_two_sessions(s: Services) -> None:
    a = await fresh(s, "u1", session_id="shared-id", state={"who": "u1"})
    b = await fresh(s, "u2", session_id="shared-id", state={"who": "u2"})
    assert (await reload(s, a)).state["who"] == "u1"
    assert (await reload(s, b)).state["who"] == "u2"


@case
async def create_splits_initial_state_into_scopes(s: Services) -> None:
    first = await fresh(s, state={"s": 1, "app:a": 2, "user:u": 3, "temp:t": 4})
    assert first.state == {"s": 1, "app:a": 2, "user:u": 3}
    mine = await fresh(s, "u1")
    assert mine.state == {"app:a": 2, "user:u": 3}
    theirs = await fresh(s, "u2")
    assert theirs.state == {"app:a": 2}
    assert (await reload(s, first)).state == {"s": 1, "app:a": 2, "user:u": 3}


@case
async def get_of_a_missing_session_returns_none(s: Services) -> None:
    session = await fresh(s)
    for app, user, sid in [
        (s.app, "u1", "nope"),
        (s.app, "u2", session.id),
        ("other_app", "u1", session.id),
    ]:
        assert await s.service.get_session(app_name=app, user_id=user, session_id=sid) is None


@case
async def events_come_back_equal_and_in_order(s: Services) -> None:
    session = await fresh(s)
    sent = [event("user", "one"), event("agent", "two"), event("user", "three")]
    for e in sent:
        await s.service.append_event(session, e)
    got = await reload(s, session, other=True)
    assert [e.id for e in got.events] == [e.id for e in sent]
    assert got.events == sent


@case
async def rich_events_round_trip_exactly(s: Services) -> None:
    session = await fresh(s)
    call = Event(
        author="agent",
        invocation_id="inv-9",
        content=types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(id="c1", name="lookup", args={"q": "ü"})
                )
            ],
        ),
        custom_metadata={"trace": [1, 2]},
        actions=EventActions(state_delta={"k": {"nested": [1, None]}}),
    )
    answer = Event(
        author="agent",
        invocation_id="inv-9",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="c1", name="lookup", response={"r": 1.5}
                    )
                )
            ],
        ),
        actions=EventActions(transfer_to_agent="helper", escalate=True),
        branch="root.helper",
    )
    await s.service.append_event(session, call)
    await s.service.append_event(session, answer)
    assert (await reload(s, session, other=True)).events == [call, answer]


@case
async def num_recent_events_returns_the_newest(s: Services) -> None:
    session = await fresh(s)
    sent = [event("user", f"m{i}") for i in range(5)]
    for e in sent:
        await s.service.append_event(session, e)
    for n, expected in [(0, []), (2, sent[-2:]), (5, sent), (50, sent)]:
        got = await reload(s, session, config=GetSessionConfig(num_recent_events=n))
        assert got.events == expected, n
        assert got.state == session.state


@case
async def after_timestamp_returns_events_at_or_after_it(s: Services) -> None:
    session = await fresh(s)
    base = time.time()
    sent = [event("user", f"m{i}", timestamp=base + i) for i in range(4)]
    for e in sent:
        await s.service.append_event(session, e)
    got = await reload(s, session, config=GetSessionConfig(after_timestamp=base + 2))
    assert got.events == sent[2:]
    both = await reload(
        s, session, config=GetSessionConfig(after_timestamp=base + 1, num_recent_events=2)
    )
    assert both.events == sent[2:]


@case
async def list_sessions_of_a_user_without_events_with_merged_state(s: Services) -> None:
    a = await fresh(s, "u1", state={"n": 1, "user:x": 1, "app:y": 2})
    await s.service.append_event(a, event())
    b = await fresh(s, "u1", state={"n": 2})
    await fresh(s, "u2", state={"n": 3})
    listed = (await s.service.list_sessions(app_name=s.app, user_id="u1")).sessions
    assert sorted(x.id for x in listed) == sorted([a.id, b.id])
    assert all(x.events == [] for x in listed)
    by_id = {x.id: x.state for x in listed}
    assert by_id[a.id] == {"n": 1, "user:x": 1, "app:y": 2}
    assert by_id[b.id] == {"n": 2, "user:x": 1, "app:y": 2}


@case
async def list_sessions_without_a_user_lists_every_user(s: Services) -> None:
    await fresh(s, "u1")
    await fresh(s, "u2")
    listed = (await s.service.list_sessions(app_name=s.app)).sessions
    assert sorted(x.user_id for x in listed) == ["u1", "u2"]
    assert (await s.service.list_sessions(app_name="another_app")).sessions == []
    assert (await s.service.list_sessions(app_name=s.app, user_id="nobody")).sessions == []


@case
async def list_sessions_is_oldest_update_first(s: Services) -> None:
    a, b = await fresh(s), await fresh(s)
    await s.service.append_event(a, event(timestamp=time.time() + 60))
    listed = (await s.service.list_sessions(app_name=s.app, user_id="u1")).sessions
    assert [x.id for x in listed] == [b.id, a.id]


@case
async def delete_removes_only_that_session(s: Services) -> None:
    a = await fresh(s, state={"app:keep": 1})
    await s.service.append_event(a, event())
    b = await fresh(s)
    await s.service.delete_session(app_name=s.app, user_id="u1", session_id=a.id)
    assert await s.service.get_session(app_name=s.app, user_id="u1", session_id=a.id) is None
    assert [
        x.id for x in (await s.service.list_sessions(app_name=s.app, user_id="u1")).sessions
    ] == [b.id]
    assert (await reload(s, b)).state == {"app:keep": 1}
    # Deleting what is not there is not an error.
    await s.service.delete_session(app_name=s.app, user_id="u1", session_id=a.id)


@case
async def delete_by_another_user_removes_nothing(s: Services) -> None:
    a = await fresh(s)
    await s.service.delete_session(app_name=s.app, user_id="u2", session_id=a.id)
    assert await s.service.get_session(app_name=s.app, user_id="u1", session_id=a.id) is not None


@case
async def state_deltas_reach_their_scopes(s: Services) -> None:
    mine = await fresh(s, "u1")
    sibling = await fresh(s, "u1")
    theirs = await fresh(s, "u2")
    await s.service.append_event(mine, event(delta={"s": 1, "app:a": 2, "user:u": 3}))
    assert mine.state == {"s": 1, "app:a": 2, "user:u": 3}
    assert (await reload(s, mine, other=True)).state == {"s": 1, "app:a": 2, "user:u": 3}
    assert (await reload(s, sibling)).state == {"app:a": 2, "user:u": 3}
    assert (await reload(s, theirs)).state == {"app:a": 2}


@case
async def later_deltas_overwrite_earlier_ones(s: Services) -> None:
    session = await fresh(s, state={"k": 0})
    await s.service.append_event(session, event(delta={"k": 1, "user:c": 1}))
    await s.service.append_event(session, event(delta={"k": 2, "user:c": 2}))
    assert (await reload(s, session)).state == {"k": 2, "user:c": 2}


@case
async def get_user_state_returns_raw_keys(s: Services) -> None:
    assert await s.service.get_user_state(app_name=s.app, user_id="u1") == {}
    session = await fresh(s, "u1", state={"user:a": 1, "app:b": 2, "c": 3})
    await s.service.append_event(session, event(delta={"user:d": 4}))
    assert await s.service.get_user_state(app_name=s.app, user_id="u1") == {"a": 1, "d": 4}
    assert await s.service.get_user_state(app_name=s.app, user_id="u2") == {}


@case
async def temp_state_is_on_the_object_but_never_stored(s: Services) -> None:
    session = await fresh(s)
    sent = event(delta={"temp:scratch": 1, "kept": 2})
    await s.service.append_event(session, sent)
    assert session.state["temp:scratch"] == 1
    got = await reload(s, session, other=True)
    assert got.state == {"kept": 2}
    assert got.events[0].actions.state_delta == {"kept": 2}


@case
async def a_partial_event_is_not_stored(s: Services) -> None:
    session = await fresh(s)
    partial = event("agent", "stream chunk", delta={"p": 1})
    partial.partial = True
    returned = await s.service.append_event(session, partial)
    assert returned is partial
    got = await reload(s, session)
    assert got.events == [] and got.state == {}


@case
async def append_moves_last_update_time_to_the_event(s: Services) -> None:
    session = await fresh(s)
    sent = event(timestamp=time.time() + 30)
    await s.service.append_event(session, sent)
    assert abs(session.last_update_time - sent.timestamp) < 1e-3
    assert abs((await reload(s, session)).last_update_time - sent.timestamp) < 1e-3


@case
async def appends_continue_after_create_and_after_reload(s: Services) -> None:
    session = await fresh(s)
    await s.service.append_event(session, event(text="a"))
    await s.service.append_event(session, event(text="b"))
    loaded = await reload(s, session, other=True)
    await s.other.append_event(loaded, event(text="c"))
    assert [e.content.parts[0].text for e in (await reload(s, session)).events] == ["a", "b", "c"]


@case
async def append_to_a_deleted_session_fails(s: Services) -> None:
    session = await fresh(s)
    await s.service.delete_session(app_name=s.app, user_id="u1", session_id=session.id)
    try:
        await s.service.append_event(session, event())
    except ValueError:
        pass  # ADK's SessionNotFoundError (a ValueError)
    else:
        raise AssertionError("an event was appended to a deleted session")
    assert await s.service.get_session(app_name=s.app, user_id="u1", session_id=session.id) is None


async def _refused_stale(s: Services, writer: Any, stale: Session, sent: Event) -> None:
    try:
        await writer.append_event(stale, sent)
    except StaleSessionError:
        pass
    else:
        raise AssertionError("a stale session object's event was stored")


@case
async def a_stale_session_object_is_refused(s: Services) -> None:
    session = await fresh(s)
    first, second = await reload(s, session), await reload(s, session)
    await s.service.append_event(first, event(text="first", delta={"k": 1}))
    await _refused_stale(s, s.service, second, event(text="second", delta={"k": 2}))
    got = await reload(s, session)
    assert [e.content.parts[0].text for e in got.events] == ["first"]
    assert got.state == {"k": 1}


@case
async def a_stale_writer_on_another_instance_is_refused(s: Services) -> None:
    session = await fresh(s)
    here, there = await reload(s, session), await reload(s, session, other=True)
    await s.service.append_event(here, event(text="here"))
    await _refused_stale(s, s.other, there, event(text="there"))
    got = await reload(s, session, other=True)
    assert [e.content.parts[0].text for e in got.events] == ["here"]


@case
async def racing_writers_of_one_revision_store_exactly_one_event(s: Services) -> None:
    session = await fresh(s)
    outcomes: list[str] = []
    for round_ in range(4):
        here, there = await reload(s, session), await reload(s, session, other=True)

        async def write(service: Any, copy: Session, text: str) -> str:
            try:
                await service.append_event(copy, event(text=text))
            except StaleSessionError:
                return "stale"
            return "stored"

        outcomes += await asyncio.gather(
            write(s.service, here, f"here-{round_}"), write(s.other, there, f"there-{round_}")
        )
    got = await reload(s, session)
    assert len(got.events) == 4, f"{len(got.events)} events stored by 8 racing writes"
    assert outcomes.count("stored") == 4
