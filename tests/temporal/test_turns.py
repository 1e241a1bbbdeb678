"""Turns end to end: a real dev server, a real worker, SQLite, the offline model."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from temporalio.client import WorkflowUpdateFailedError

from statecore.contract._session import workflow_id_for
from statecore.core._errors import (
    ContentTooLargeError,
    EmptyContentError,
    InvalidIdentifierError,
    StatecoreError,
)
from statecore.core._limits import MAX_MESSAGE_BYTES
from statecore.core._models import SessionRef
from statecore.store import open_store
from tests.temporal.conftest import Env


async def stored_messages(env: Env, agent: str, session: str) -> list:
    store = await open_store(env.database_url)
    try:
        async with store.transaction() as tx:
            return await tx.conversation.messages(SessionRef(agent_id=agent, session_id=session))
    finally:
        await store.close()


async def test_each_turn_sees_the_conversation_from_sql(env: Env) -> None:
    replies = []
    for i in range(3):
        result = await env.sessions.send(env.agent, "s1", f"message {i}", turn_id=f"t{i}")
        assert result.turn == i + 1
        assert not result.duplicate
        replies.append(result.reply.content)
    # The offline model reports how many user messages its context held: the context is
    # assembled from SQL, so it grows by one per turn.
    for i, reply in enumerate(replies):
        assert f"user messages: {i + 1}," in reply
        assert f'"message {i}"' in reply
    rows = await stored_messages(env, env.agent, "s1")
    assert [m.seq for m in rows] == [1, 2, 3, 4, 5, 6]
    assert [m.role for m in rows] == ["user", "assistant"] * 3
    assert [m.turn_id for m in rows] == ["t0", "t0", "t1", "t1", "t2", "t2"]


async def test_a_turn_writes_its_message_and_reply_to_history_once_each(env: Env) -> None:
    """History grows by what a turn must carry, once: the model call's input holds the
    user's message once, its result the reply once (the offline reply quotes the message)."""
    for i in range(3):
        await env.sessions.send(env.agent, "lean", f"lean-marker-{i} please", turn_id=f"t{i}")
    handle = env.client.get_workflow_handle(workflow_id_for(env.agent, "lean"))
    history = await handle.fetch_history()
    scheduled = [
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    ]
    completed = [
        e for e in history.events if e.HasField("activity_task_completed_event_attributes")
    ]
    for i in range(3):
        marker = f"lean-marker-{i}".encode()
        assert [e.SerializeToString().count(marker) for e in scheduled].count(1) == 1
        assert sum(e.SerializeToString().count(marker) for e in scheduled) == 1
        assert sum(e.SerializeToString().count(marker) for e in completed) == 1


async def test_the_same_turn_id_commits_once_and_returns_the_same_result(env: Env) -> None:
    first = await env.sessions.send(env.agent, "dup", "only once", turn_id="turn-1")
    again = await env.sessions.send(env.agent, "dup", "only once", turn_id="turn-1")
    assert again.turn == first.turn == 1
    assert again.reply == first.reply
    rows = await stored_messages(env, env.agent, "dup")
    assert len(rows) == 2
    report = await env.sessions.describe(env.agent, "dup")
    assert report.checkpoint.turn == 1
    assert report.store("conversation").items == 2


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"turn_id": "t", "content": ""}, "EmptyContent"),
        ({"turn_id": "t", "content": "   \n"}, "EmptyContent"),
        ({"turn_id": "a/b", "content": "x"}, "InvalidIdentifier"),
        ({"turn_id": "t", "content": "x\x00y"}, "InvalidInput"),
        ({"turn_id": "t", "content": "x", "role": "tool"}, "InvalidInput"),
        ({"turn_id": "t", "content": "x", "role": "wizard"}, "InvalidInput"),
        ({"content": "x"}, "InvalidInput"),
        ({"turn_id": "t", "content": "x", "unknown": 1}, "InvalidInput"),
        ("just a string", "InvalidInput"),
        ({"turn_id": "t", "content": "x" * (MAX_MESSAGE_BYTES + 1)}, "ContentTooLarge"),
    ],
)
async def test_malformed_turns_are_rejected_with_a_type_and_change_nothing(
    env: Env, payload: object, code: str
) -> None:
    await env.sessions.send(env.agent, "bad", "hello", turn_id="ok-1")
    handle = env.client.get_workflow_handle(workflow_id_for(env.agent, "bad"))
    with pytest.raises(WorkflowUpdateFailedError) as caught:
        await handle.execute_update("send_message", payload)
    assert caught.value.cause.type == code
    rows = await stored_messages(env, env.agent, "bad")
    assert len(rows) == 2
    # The session is healthy afterwards.
    after = await env.sessions.send(env.agent, "bad", "still here", turn_id="ok-2")
    assert after.turn == 2


async def test_client_refuses_bad_turns_before_sending(env: Env) -> None:
    with pytest.raises(EmptyContentError):
        await env.sessions.send(env.agent, "c", "")
    with pytest.raises(ContentTooLargeError):
        await env.sessions.send(env.agent, "c", "y" * (MAX_MESSAGE_BYTES + 10))
    with pytest.raises(InvalidIdentifierError):
        await env.sessions.send(env.agent, "c", "hi", turn_id="bad turn id")
    with pytest.raises(InvalidIdentifierError):
        await env.sessions.send("agent/x", "c", "hi")
    # Nothing reached the server: no workflow was started for these.
    with pytest.raises(StatecoreError):
        await env.sessions.describe(env.agent, "c")


async def test_twenty_concurrent_sends_to_one_session_all_succeed_in_order(env: Env) -> None:
    results = await asyncio.gather(
        *(env.sessions.send(env.agent, "busy", f"m{i}", turn_id=f"c{i}") for i in range(20))
    )
    assert sorted(r.turn for r in results) == list(range(1, 21))
    rows = await stored_messages(env, env.agent, "busy")
    assert [m.seq for m in rows] == list(range(1, 41))
    # Turns never interleave: each turn's user message is directly followed by its reply.
    for user, reply in zip(rows[0::2], rows[1::2], strict=True):
        assert user.role == "user" and reply.role == "assistant"
        assert user.turn_id == reply.turn_id
    by_turn = {r.turn: r.turn_id for r in results}
    assert [by_turn[t] for t in range(1, 21)] == [m.turn_id for m in rows[0::2]]


async def test_system_prompt_and_hints_reach_the_model(env: Env) -> None:
    first = await env.sessions.send(
        env.agent, "p", "hello", turn_id="p1", system_prompt="You are terse."
    )
    assert "system prompt: yes" in first.reply.content
    await env.sessions.add_hint(env.agent, "p", "User prefers Python")
    second = await env.sessions.send(env.agent, "p", "again", turn_id="p2")
    assert "hints: 1" in second.reply.content


class _NeverAnswers:
    """A model that never replies (the LLM is the one part a test may fake)."""

    name = "never"

    async def complete(self, request):  # type: ignore[no-untyped-def]
        await asyncio.Event().wait()


async def test_a_cancelled_send_stops_instead_of_retrying(dev_server) -> None:
    # The turn is accepted and then waits on the model forever: the client is polling for the
    # result, where the SDK reports our own cancellation as a retryable-looking error.
    from tests.dbs import fresh_database
    from tests.temporal.conftest import running_env

    async with (
        fresh_database("sqlite", "cancel") as url,
        running_env(dev_server, url, models={"default": _NeverAnswers()}) as env,
    ):
        pending = asyncio.ensure_future(env.sessions.send(env.agent, "c", "hi", turn_id="x1"))
        for _ in range(100):  # until the turn is accepted and in flight
            await asyncio.sleep(0.1)
            with contextlib.suppress(Exception):
                desc = await env.sessions.handle(env.agent, "c").describe()
                if desc.raw_description.pending_activities:
                    break
        await asyncio.sleep(0.5)
        pending.cancel()
        done, _ = await asyncio.wait({pending}, timeout=10)
        assert done, "the cancelled send kept retrying"
        assert pending.cancelled()


async def test_turn_api_first_turn_needs_no_opened_session(dev_server) -> None:
    from tests.dbs import fresh_database
    from tests.temporal.conftest import running_env
    from tests.temporal.minimal_turn_workflow import MinimalTurnAgent

    async with (
        fresh_database("sqlite", "minimal") as url,
        running_env(dev_server, url, extra_workflows=[MinimalTurnAgent]) as env,
    ):
        reply = await env.client.execute_workflow(
            MinimalTurnAgent.run,
            {"agent_id": env.agent, "session_id": "fresh", "content": "hello"},
            id=f"minimal-{env.agent}",
            task_queue=env.task_queue,
        )
        assert "hello" in reply
        rows = await stored_messages(env, env.agent, "fresh")
        assert [m.role for m in rows] == ["user", "assistant"]
